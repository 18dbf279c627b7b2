"""Build a word n-gram LM (ARPA) with KenLM's ``lmplz`` from sentences, after refusing extra LM text that holds a dev
or test sentence (an LM that has seen them would make the dev-tuned weights and the test WER meaningless).

The training transcripts are not refused: the acoustic model trained on them too, and a corpus whose speakers read
the same prompts (AN4: 22 of dev's 100 and 25 of test's 130 sentences are also training sentences) has its dev/test
sentences there by design. ESPnet's AN4 LM learns the same transcripts. Their overlap is counted and printed."""
import os
import subprocess
import tempfile
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from wenet_udps.lm.arpa import LmError, LmInfo, read_arpa
from wenet_udps.lm.options import DEFAULT_ORDER, check_order_and_prune
from wenet_udps.lm.tools import find_kenlm_program


def read_sentences(path: str, keyed: bool) -> List[Tuple[int, str]]:
    """(line number, sentence) of every non-empty sentence of ``path``: a Kaldi ``text`` (``keyed``: ``key words``)
    or plain text, one sentence a line."""
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if keyed:
                parts = line.split(maxsplit=1)
                line = parts[1] if len(parts) == 2 else ""
            if line.strip():
                out.append((lineno, line.strip()))
    return out


def normalise(sentence: str) -> str:
    """The form in which sentences are compared: case-folded, whitespace collapsed."""
    return " ".join(sentence.casefold().split())


def held_out_matches(sources: Sequence[Tuple[str, List[Tuple[int, str]]]], held_out: Sequence[str]
                     ) -> List[Tuple[str, str, str]]:
    """(``path:line`` of the LM text, ``path:line`` of the held-out text, the sentence) of every LM text line that is
    a sentence of a held-out (dev/test) Kaldi text, in the order of ``sources``.

    sources: (path, its (line number, sentence)) of each LM text; held_out: Kaldi text files (dev, test).
    """
    seen: Dict[str, str] = {}
    for path in held_out:
        for lineno, sentence in read_sentences(path, keyed=True):
            seen.setdefault(normalise(sentence), f"{path}:{lineno}")
    return [(f"{path}:{lineno}", seen[normalise(sentence)], sentence)
            for path, sentences in sources for lineno, sentence in sentences if normalise(sentence) in seen]


def refuse_held_out(sources: Sequence[Tuple[str, List[Tuple[int, str]]]], held_out: Sequence[str]) -> None:
    """Raise LmError naming the first LM text line that is a sentence of a held-out (dev/test) Kaldi text."""
    matches = held_out_matches(sources, held_out)
    if matches:
        line, where, sentence = matches[0]
        raise LmError(f"{line}: the LM text contains the held-out sentence of {where} ({sentence[:50]!r}): "
                      "remove every dev and test sentence from it")


def lm_lines(sentences: Iterable[str], char_lm: bool) -> Iterable[str]:
    """The lines lmplz reads: the sentence, or for a character LM its characters separated by spaces."""
    for sentence in sentences:
        yield " ".join(c for c in sentence if not c.isspace()) if char_lm else " ".join(sentence.split())


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
    partial = out + ".partial"
    with open(partial, "wb") as f:
        proc = subprocess.run(cmd, input=text.encode("utf-8"), stdout=f, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        os.remove(partial)
        last = [line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()][-1:]
        raise LmError(f"lmplz failed building {out} (exit {proc.returncode}): {' '.join(last)}")
    os.replace(partial, out)
    return read_arpa(out)
