"""KenLM binary LMs: ``build_binary``'s output of an ARPA file, which KenLM maps into memory as it is (an ARPA file
it parses in full on every load). A binary keeps its words only as hashes, and the lexicon decoder needs them
spelled, so :func:`write_binary` writes the ARPA's unigrams beside it, one a line, in
``<binary>.words`` (:func:`words_path`); :func:`read_binary` identifies the binary by its header (order, n-gram
counts) and reads that file. :func:`read_lm` reads either kind of LM file: the one reader of every LM entry point.
"""
import os
import struct
import subprocess
from typing import List

from wenet_udps.lm.arpa import LmError, LmInfo, read_arpa
from wenet_udps.lm.tools import find_kenlm_program
from wenet_udps.utils.source_info import file_sha256

# KenLM's binary header (lm/binary_format.cc, format version 5): the magic string padded to 8 bytes, then test
# values (3 floats, 2 word indices, a uint64; 88 bytes in all), then FixedWidthParameters (20 bytes, the order first)
# and the n-gram counts as uint64s, little-endian on the machines build_binary runs on.
MAGIC = b"mmap lm http://kheafield.com/code format version 5\n\0"
_MAGIC_ANY = b"mmap lm http://kheafield.com/code"
_INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
_ORDER_AT = 88
_COUNTS_AT = _ORDER_AT + 20


def words_path(binary: str) -> str:
    """The words file of a KenLM binary: its unigrams, one a line."""
    return binary + ".words"


def is_kenlm_binary(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(len(_MAGIC_ANY)) == _MAGIC_ANY


def _rewrite_hint(binary: str) -> str:
    return (f"write both from the ARPA file with: python -m wenet_udps.bin.binarize_lm --arpa LM.arpa "
            f"--out {binary}")


def read_words(path: str, binary: str) -> List[str]:
    if not os.path.isfile(path):
        raise LmError(f"{path} not found: a KenLM binary's vocabulary is read from this file beside it "
                      f"({_rewrite_hint(binary)})")
    with open(path, "rb") as f:
        try:
            words = f.read().decode("utf-8").split("\n")
        except UnicodeDecodeError as e:
            raise LmError(f"{path}: not UTF-8 text at byte {e.start}: not the words file of {binary}") from None
    if words and words[-1] == "":
        words.pop()
    for lineno, word in enumerate(words, 1):
        if not word or word != word.strip() or len(word.split()) != 1:
            raise LmError(f"{path}:{lineno}: expected one word a line, got {word[:40]!r} ({_rewrite_hint(binary)})")
    return words


def read_binary(path: str) -> LmInfo:
    """Identify a KenLM binary by its header and read its words file.

    Raises:
        LmError: an incomplete binary (build_binary stopped), another format version, a header cut short, a missing
            or malformed words file, or one whose word count is not the binary's unigram count (another LM's).
    """
    with open(path, "rb") as f:
        head = f.read(_COUNTS_AT + 8 * 255)
    if head.startswith(_INCOMPLETE):
        raise LmError(f"{path}: an incomplete KenLM binary (build_binary did not finish): {_rewrite_hint(path)}")
    if not head.startswith(MAGIC):
        first = head.split(b"\n", 1)[0][:60].decode("ascii", "replace")
        raise LmError(f"{path}: a KenLM binary of another format version than 5 ({first!r}): build it again with "
                      f"this KenLM's build_binary")
    order = head[_ORDER_AT] if len(head) > _ORDER_AT else 0
    if order < 2 or len(head) < _COUNTS_AT + 8 * order:
        raise LmError(f"{path}: the KenLM binary's header is cut short or corrupt (order {order}): "
                      f"{_rewrite_hint(path)}")
    counts = list(struct.unpack_from(f"<{order}Q", head, _COUNTS_AT))
    words = read_words(words_path(path), path)
    # KenLM adds <unk> to an ARPA file that lacks it (then the binary has one unigram more than the ARPA's words).
    if counts[0] not in (len(words), len(words) + ("<unk>" not in words)):
        raise LmError(f"{words_path(path)}: {len(words)} words, but {path} has {counts[0]} unigrams: the words file "
                      f"belongs to another LM ({_rewrite_hint(path)})")
    return LmInfo(path=os.path.abspath(path), order=order, counts=counts, size=os.path.getsize(path),
                  sha256=file_sha256(path), words=words, kind="KenLM binary")


def read_lm(path: str) -> LmInfo:
    """An LM file, ARPA or KenLM binary (told apart by the binary's magic string), checked and identified."""
    if os.path.isfile(path) and is_kenlm_binary(path):
        return read_binary(path)
    return read_arpa(path)


def write_binary(arpa: str, out: str, memory: str = "10%") -> LmInfo:
    """Check the ARPA file ``arpa``, convert it with ``build_binary trie`` (the smallest of KenLM's structures, no
    quantization: the same scores as the ARPA) to ``out`` and write its words to ``words_path(out)``, both
    atomically. ``memory``: build_binary's sort memory (-S). Raises LmToolsMissing without build_binary, LmError
    when the ARPA is corrupt or build_binary fails (its last line in the message)."""
    info = read_arpa(arpa)
    build_binary = find_kenlm_program("build_binary")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    partial = out + ".partial"
    proc = subprocess.run([build_binary, "-S", memory, "trie", arpa, partial], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        if os.path.exists(partial):
            os.remove(partial)
        text = (proc.stderr + proc.stdout).decode("utf-8", "replace")
        last = [line for line in text.splitlines() if line.strip()][-1:]
        raise LmError(f"build_binary failed converting {arpa} to {out} (exit {proc.returncode}): {' '.join(last)}")
    words = words_path(out)
    with open(words + ".partial", "w", encoding="utf-8") as f:
        f.write("".join(w + "\n" for w in info.words))
    os.replace(words + ".partial", words)
    os.replace(partial, out)
    return read_binary(out)
