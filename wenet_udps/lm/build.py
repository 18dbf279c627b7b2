"""Build a word n-gram LM (ARPA) with KenLM's ``lmplz`` from sentences, after refusing extra LM text that holds a dev
or test sentence (an LM that has seen them would make the dev-tuned weights and the test WER meaningless).

The training transcripts are not refused: the acoustic model trained on them too, and a corpus whose speakers read
the same prompts (AN4: 22 of dev's 100 and 25 of test's 130 sentences are also training sentences) has its dev/test
sentences there by design. ESPnet's AN4 LM learns the same transcripts. Their overlap is counted and printed. The
check itself is :mod:`wenet_udps.lm.held_out`."""
import os
import subprocess
import tempfile
from typing import Iterable, List, Optional, Sequence, Tuple

from wenet_udps.lm.arpa import LmError, LmInfo, char_lm_tokens, read_arpa
from wenet_udps.lm.options import DEFAULT_ORDER, check_order_and_prune
from wenet_udps.lm.tools import find_kenlm_program
from wenet_udps.utils.atomic import open_atomic, program_failure
from wenet_udps.utils.kaldi_files import read_table, utf8_lines
from wenet_udps.utils.text_norm import TextNorm, read_form


def read_sentences(path: str, keyed: bool) -> List[Tuple[int, str]]:
    """(line number, sentence) of every non-empty sentence of ``path``: a Kaldi ``text`` (``keyed``: ``key words``)
    or plain text, one sentence a line. Read by the one reader of text files (``wenet_udps.utils.kaldi_files``): a
    byte-order mark at the start is dropped; a line that is not UTF-8 (or, keyed, a duplicate key) is a ListError
    naming the file and line."""
    if keyed:
        rows = [(lineno, value) for value, lineno in
                read_table(path, key_name="utterance key", allow_empty_value=True).values()]
    else:
        rows = [(lineno, line.strip()) for lineno, line in utf8_lines(path)]
    return [(lineno, sentence) for lineno, sentence in rows if sentence.strip()]


def lm_sentences(path: str, keyed: bool, norm: TextNorm) -> Tuple[List[Tuple[int, str]], str]:
    """The sentences of ``path`` (:func:`read_sentences`) as the LM learns them, normalised as the recipe declares
    (``wenet_udps.utils.text_norm``; punctuation it refuses is a TextNormError naming the lines), lines left empty
    dropped; and a line saying what normalising changed. An ``--lm_text`` file (not ``keyed``) without a sentence
    is an LmError: given and empty is a mistake, not nothing to add."""
    rows, counts = norm.lines(read_sentences(path, keyed), path)
    rows = [(lineno, sentence) for lineno, sentence in rows if sentence]
    if not rows and not keyed:
        raise LmError(f"{path}: the LM text holds no sentence (an empty file?): give a text with sentences or "
                      "leave it out")
    return rows, f"{path} normalised (case {norm.case}, punctuation {norm.punctuation}): {counts.describe()}"


def lm_lines(sentences: Iterable[str], char_lm: bool) -> Iterable[str]:
    """The lines lmplz reads: the sentence, or for a character LM its CJK characters and its other words
    (``arpa.char_lm_tokens``: ``我爱IPHONE APP`` is ``我 爱 IPHONE APP``) separated by spaces; in the read form (NFKC,
    no format characters: the one normaliser's), whoever calls :func:`build_arpa`."""
    for sentence in map(read_form, sentences):
        yield " ".join(char_lm_tokens(sentence) if char_lm else sentence.split())


def build_arpa(sentences: Iterable[str], out: str, *, order: int = DEFAULT_ORDER, prune: Optional[Sequence[int]] = None,
               char_lm: bool = False, memory: str = "10%") -> LmInfo:
    """Estimate a modified Kneser-Ney ``order``-gram LM with lmplz and write it as ARPA to ``out`` (atomically).

    prune: lmplz's ``--prune`` thresholds, one per order from the unigrams (n-grams seen this many times or fewer
    are dropped; the rules: :func:`.options.check_order_and_prune`). ``--discount_fallback`` lets a small corpus (too
    few singletons for the discount estimate) build with fallback discounts, as a training-transcript LM often is.
    Raises LmToolsMissing without lmplz, LmError when lmplz fails (its last line is in the message).
    """
    check_order_and_prune(order, prune)
    lmplz = find_kenlm_program("lmplz")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    cmd = [lmplz, "-o", str(order), "--discount_fallback", "-S", memory,
           "-T", tempfile.gettempdir()]
    if prune:
        cmd += ["--prune", *map(str, prune)]
    text = "".join(line + "\n" for line in lm_lines(sentences, char_lm))
    if not text.strip():
        raise LmError(f"no LM text for {out}: every text given was empty")
    with open_atomic(out, "wb") as f:
        proc = subprocess.run(cmd, input=text.encode("utf-8"), stdout=f, stderr=subprocess.PIPE)
        if proc.returncode != 0:  # a full disk is an OSError naming ``out``; else lmplz's own reason
            raise LmError(f"lmplz failed building {out} (exit {proc.returncode}): "
                          f"{program_failure('lmplz', proc.stderr.decode('utf-8', 'replace'), out, proc.returncode)}")
    return read_arpa(out)
