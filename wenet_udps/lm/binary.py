"""KenLM binary LMs: ``build_binary``'s output of an ARPA file, which KenLM maps into memory as it is (an ARPA file
it parses in full on every load). A binary keeps its words only as hashes, and the lexicon decoder needs them
spelled, so :func:`write_binary` writes the ARPA's unigrams beside it, one a line, in
``<binary>.words`` (:func:`words_path`); :func:`read_binary` identifies the binary by its header (order, n-gram
counts) and reads that file. :func:`read_lm` reads either kind of LM file: the one reader of every LM entry
point; :func:`load_kenlm` hands KenLM a private copy in memory of the file read (never the file itself, which may be
replaced or overwritten meanwhile).

The words file is bound to its binary and to its own words: its first line records the binary's SHA-256 and size
and the SHA-256 of the words below it (``#binary sha256=<hex> size=<bytes> words_sha256=<hex>``), and every read
checks all three, so that another LM's words file (even one of the same word count, whose words would be scored as
other words) is refused naming both files, and so is a words file edited by hand (a word replaced by another, even
one already in the file: the LM's words are part of the LM). A words file without that line, or whose line records
no words' SHA-256 (written by an older wenet_udps), is refused too, with the one command that rewrites both.
:func:`read_words` is the one reader of a words file (tests/lm/test_words_file_entry_points.py finds every other
use of :func:`words_path` and fails on one that reads it otherwise); :func:`lm_content` is an LM's identity for the
API's cache of loaded LMs, its words file's content included.
"""
import hashlib
import os
import re
import struct
import subprocess
from typing import Any, Callable, List, Tuple

from wenet_udps.lm.arpa import LmError, LmInfo, read_arpa
from wenet_udps.lm.tools import find_kenlm_program
from wenet_udps.utils.atomic import program_failure, temp_path, write_text
from wenet_udps.utils.cli import open_input
from wenet_udps.utils.source_info import content_sha256, file_sha256

# KenLM's binary header (lm/binary_format.cc, format version 5): the magic string padded to 8 bytes, then test
# values (3 floats, 2 word indices, a uint64; 88 bytes in all), then FixedWidthParameters (20 bytes, the order first)
# and the n-gram counts as uint64s, little-endian on the machines build_binary runs on.
MAGIC = b"mmap lm http://kheafield.com/code format version 5\n\0"
_MAGIC_ANY = b"mmap lm http://kheafield.com/code"
_INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
_ORDER_AT = 88
_COUNTS_AT = _ORDER_AT + 20
# The words file's first line: the binary it was written for, and the SHA-256 of the words below it. A word holds no
# space, so no word reads as this line. _BINARY_ONLY: the line of a words file written before its words were hashed.
_BINDING = re.compile(r"^#binary sha256=([0-9a-f]{64}) size=(\d+) words_sha256=([0-9a-f]{64})$")
_BINARY_ONLY = re.compile(r"^#binary sha256=[0-9a-f]{64} size=\d+$")


def words_path(binary: str) -> str:
    """The words file of a KenLM binary: its unigrams, one a line."""
    return binary + ".words"


def is_kenlm_binary(path: str) -> bool:
    with open_input(path, "rb") as f:
        return f.read(len(_MAGIC_ANY)) == _MAGIC_ANY


def _rewrite_hint(binary: str) -> str:
    arpa = os.path.splitext(binary)[0] + ".arpa"  # run.sh's lm.arpa beside lm.bin; else the user's ARPA file
    return (f"write both from the ARPA file with: python -m wenet_udps.bin.binarize_lm --arpa "
            f"{arpa if os.path.isfile(arpa) else 'LM.arpa'} --out {binary}")


def binding_line(sha256: str, size: int, words: bytes) -> str:
    """The words file's first line, naming the binary (its SHA-256 and size) the words belong to and the SHA-256
    of ``words``, the bytes of the file below this line."""
    return f"#binary sha256={sha256} size={size} words_sha256={hashlib.sha256(words).hexdigest()}"


def lm_content(path: str) -> Tuple[str, str]:
    """An LM's identity by content: (the SHA-256 of the LM file, that of a KenLM binary's words file, or "" for an
    ARPA file or a binary without one), each computed again only when its file may have changed
    (``source_info.content_sha256``). The second is ``LmInfo.words_sha256`` of what :func:`read_lm` read."""
    words = words_path(path)
    binary = os.path.isfile(path) and is_kenlm_binary(path)
    return content_sha256(path), content_sha256(words) if binary and os.path.isfile(words) else ""


def read_words(path: str, binary: str, binding: Tuple[str, int]) -> Tuple[List[str], str]:
    """The words of the words file ``path`` of the KenLM binary ``binary``, whose (SHA-256, size) is ``binding``,
    and the SHA-256 of the whole words file read (``LmInfo.words_sha256``).

    Raises:
        LmError: the file is missing, not UTF-8, records no binary (written before the binding) or no SHA-256 of its
            words (written before those were hashed), records another binary (naming both files), holds other words
            than those it recorded (edited after it was written) or has a line that is not one word.
    """
    if not os.path.isfile(path):
        raise LmError(f"{path} not found: a KenLM binary's vocabulary is read from this file beside it "
                      f"({_rewrite_hint(binary)})")
    with open_input(path, "rb") as f:
        data = f.read()
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise LmError(f"{path}: not UTF-8 text at byte {e.start}: not the words file of {binary}") from None
    m = _BINDING.match(lines[0])
    if m is None:
        what = ("records no SHA-256 of its words (its first line has no 'words_sha256=...': written by an older "
                "wenet_udps), so a word changed in it cannot be told" if _BINARY_ONLY.match(lines[0]) else
                f"does not record the KenLM binary it belongs to (its first line is {lines[0][:40]!r}, not "
                f"'#binary sha256=... size=... words_sha256=...': written by an older wenet_udps or by hand), so "
                f"it cannot be told from another LM's words")
        raise LmError(f"{path} {what}; {_rewrite_hint(binary)}")
    sha256, size, recorded = m.group(1), int(m.group(2)), m.group(3)
    if (sha256, size) != binding:
        raise LmError(f"{path} belongs to another LM: it was written for a KenLM binary of SHA-256 {sha256[:12]} "
                      f"({size} bytes), and {binary} has SHA-256 {binding[0][:12]} ({binding[1]} bytes); "
                      f"{_rewrite_hint(binary)}")
    actual = hashlib.sha256(data.split(b"\n", 1)[1] if b"\n" in data else b"").hexdigest()
    if actual != recorded:
        raise LmError(f"{path}: its words were changed after they were written (their SHA-256 is {actual[:12]}, "
                      f"its first line records {recorded[:12]}): an LM's words are part of it, and a word changed "
                      f"is scored as another or never output; {_rewrite_hint(binary)}")
    words = lines[1:]
    if words and words[-1] == "":
        words.pop()
    for lineno, word in enumerate(words, 2):
        if not word or word != word.strip() or len(word.split()) != 1:
            raise LmError(f"{path}:{lineno}: expected one word a line, got {word[:40]!r} ({_rewrite_hint(binary)})")
    return words, hashlib.sha256(data).hexdigest()


def read_binary(path: str) -> LmInfo:
    """Identify a KenLM binary by its header and read its words file.

    Raises:
        LmError: an incomplete binary (build_binary stopped), another format version, a header cut short, a missing
            or malformed words file, one bound to another binary or to none (:func:`read_words`), or one whose word
            count is not the binary's unigram count.
    """
    with open_input(path, "rb") as f:
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
    sha256, size = file_sha256(path), os.path.getsize(path)
    words, words_sha256 = read_words(words_path(path), path, (sha256, size))
    # KenLM adds <unk> to an ARPA file that lacks it (then the binary has one unigram more than the ARPA's words).
    if counts[0] not in (len(words), len(words) + ("<unk>" not in words)):
        raise LmError(f"{words_path(path)}: {len(words)} words, but {path} has {counts[0]} unigrams: the words file "
                      f"belongs to another LM ({_rewrite_hint(path)})")
    return LmInfo(path=os.path.abspath(path), order=order, counts=counts, size=size, sha256=sha256, words=words,
                  kind="KenLM binary", words_sha256=words_sha256)


def read_lm(path: str) -> LmInfo:
    """An LM file, ARPA or KenLM binary (told apart by the binary's magic string), checked and identified."""
    if os.path.isfile(path) and is_kenlm_binary(path):
        return read_binary(path)
    return read_arpa(path)


def load_kenlm(info: LmInfo, load: Callable[[str], Any]) -> Any:
    """``load(path)`` (KenLM's loader) on a private in-memory copy of the LM file ``info`` describes, never on the
    file itself.

    Why: KenLM maps a binary into memory as it is, so a binary overwritten in place (``cp new.bin lm.bin``) while a
    model holds it changed the pages under KenLM's feet, and the next decode died with SIGSEGV (issue 66). The copy
    (an anonymous memory file, ``memfd``) is what KenLM maps or parses; nobody else can write it, and it goes with
    the last reference. The copy is checked against ``info.sha256`` (what ``read_lm`` read and checked): a file
    changed between the two reads is refused (LmError), so the LM decoded with is the one identified.
    """
    fd = os.memfd_create("wenet_udps_lm", os.MFD_CLOEXEC)
    try:
        digest = hashlib.sha256()
        with open_input(info.path, "rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
                view = memoryview(block)
                while view:
                    view = view[os.write(fd, view):]
        if digest.hexdigest() != info.sha256:
            raise LmError(f"{info.path} changed while it was being loaded (SHA-256 {info.sha256[:12]} when read, "
                          f"{digest.hexdigest()[:12]} when copied): load it again once it is written")
        return load(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)  # KenLM holds its own mapping (a binary) or has parsed the file (ARPA)


def write_binary(arpa: str, out: str, memory: str = "10%") -> LmInfo:
    """Check the ARPA file ``arpa``, convert it with ``build_binary trie`` (the smallest of KenLM's structures, no
    quantization: the same scores as the ARPA) to ``out`` and write its words to ``words_path(out)``, bound to the
    binary by its SHA-256 and size (:func:`binding_line`), both atomically. ``memory``: build_binary's sort memory
    (-S). Raises LmToolsMissing without build_binary, LmError when the ARPA is corrupt or build_binary fails (its
    last line in the message)."""
    info = read_arpa(arpa)
    build_binary = find_kenlm_program("build_binary")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    words = words_path(out)
    with temp_path(out) as partial:
        proc = subprocess.run([build_binary, "-S", memory, "trie", arpa, partial], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        if proc.returncode != 0:  # a full disk is an OSError naming ``out``; else build_binary's own reason
            text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
            raise LmError(f"build_binary failed converting {arpa} to {out} (exit {proc.returncode}): "
                          f"{program_failure('build_binary', text, out, proc.returncode)}")
        # Words first: a run stopped between the two leaves a pair that read_binary refuses, never one it accepts.
        listed = "".join(w + "\n" for w in info.words)
        write_text(words, binding_line(file_sha256(partial), os.path.getsize(partial), listed.encode("utf-8")) + "\n"
                   + listed)
    return read_binary(out)
