#!/usr/bin/env python3
"""Word/character error rate in WeNet's compute-wer output format.

Usage: compute-wer.py [--char=1] [--v=1] [--case_sensitive=0] [--ignore_words=FILE]
                      [--padding-symbol=space|underline] ref hyp > wer

``ref`` and ``hyp`` are Kaldi-style text files (``key transcript`` per line). With ``--v=1`` every
reference utterance gets a block::

    utt: BAC009S0764W0121
    WER: 7.69 % N=13 C=12 S=1 D=0 I=0
    lab: 甚 至 出 现 交 易
    rec: 甚 至 出 线 交 易

and the last line is ``Overall -> 4.61 % N=104765 C=... S=... D=... I=...``.
Differences from WeNet's script: a reference utterance with no hypothesis is scored as all deletions
(WeNet skips it, which flatters the result), and the number of such utterances is printed; hypothesis
keys with no reference are reported and ignored. ``--char=1`` scores like WeNet's character mode: every
CJK character is a token, English words and numbers stay whole, ``<tag>`` symbols such as ``<unk>`` stay whole,
and spaces and punctuation are dropped.
"""
import argparse
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import jiwer

SEPARATOR = "=" * 75


@dataclass
class Counts:
    """Edit counts: ``N`` reference tokens, ``C`` correct, ``S``/``D``/``I`` substitutions, deletions, insertions."""

    N: int = 0
    C: int = 0
    S: int = 0
    D: int = 0
    I: int = 0  # noqa: E741 (the conventional name)

    def add(self, other: "Counts") -> None:
        self.N += other.N
        self.C += other.C
        self.S += other.S
        self.D += other.D
        self.I += other.I

    def error_rate(self) -> float:
        """Percent errors; with no reference tokens, any insertion counts as 100 %."""
        errors = self.S + self.D + self.I
        if self.N == 0:
            return 100.0 if errors else 0.0
        return 100.0 * errors / self.N

    def __str__(self) -> str:
        return f"{self.error_rate():.2f} % N={self.N} C={self.C} S={self.S} D={self.D} I={self.I}"


@dataclass
class Alignment:
    counts: Counts
    pairs: List[Tuple[str, str]] = field(default_factory=list)  # (ref token or "", hyp token or "")


def char_tokens(text: str) -> List[str]:
    """WeNet's character mode: each CJK (Unicode "Lo") character is a token; a run of other characters (an English
    word, a number) stays one token; ``<...>`` tags stay whole; spaces and punctuation are dropped."""
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace() or unicodedata.category(ch).startswith("P") and ch != "<":
            i += 1
        elif ch == "<" and text.find(">", i + 1) > i + 1 and not any(
                c.isspace() for c in text[i + 1:text.find(">", i + 1)]):
            end = text.find(">", i + 1)
            tokens.append(text[i:end + 1])
            i = end + 1
        elif unicodedata.category(ch) == "Lo":
            tokens.append(ch)
            i += 1
        else:
            j = i + 1
            while j < len(text) and not text[j].isspace() and text[j] != "<" \
                    and unicodedata.category(text[j]) != "Lo" and not unicodedata.category(text[j]).startswith("P"):
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def tokenize(text: str, *, char: bool, case_sensitive: bool, ignore: Set[str]) -> List[str]:
    """Split a transcript into scoring tokens (words, or characters with ``char``)."""
    if not case_sensitive:
        text = text.upper()
    tokens = char_tokens(text) if char else text.split()
    return [t for t in tokens if t not in ignore]


def align(ref: Sequence[str], hyp: Sequence[str]) -> Alignment:
    """Minimum edit alignment of two token lists (Levenshtein via jiwer), with S/D/I split."""
    if not ref or not hyp:
        pairs = [(r, "") for r in ref] + [("", h) for h in hyp]
        return Alignment(Counts(N=len(ref), D=len(ref), I=len(hyp)), pairs)
    # Tokens never contain whitespace, so joining with a space gives jiwer exactly these tokens.
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    counts = Counts(N=len(ref), C=out.hits, S=out.substitutions, D=out.deletions, I=out.insertions)
    pairs: List[Tuple[str, str]] = []
    for chunk in out.alignments[0]:
        r = list(ref[chunk.ref_start_idx:chunk.ref_end_idx])
        h = list(hyp[chunk.hyp_start_idx:chunk.hyp_end_idx])
        if chunk.type == "delete":
            pairs.extend((t, "") for t in r)
        elif chunk.type == "insert":
            pairs.extend(("", t) for t in h)
        else:  # equal / substitute: same length on both sides
            pairs.extend(zip(r, h))
    return Alignment(counts, pairs)


def display_width(token: str) -> int:
    """Terminal columns of a token (wide CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in token)


def aligned_lines(pairs: Sequence[Tuple[str, str]], pad: str) -> Tuple[str, str]:
    """``lab``/``rec`` strings whose tokens line up column by column."""
    lab, rec = [], []
    for r, h in pairs:
        width = max(display_width(r), display_width(h))
        lab.append(r + pad * (width - display_width(r)))
        rec.append(h + pad * (width - display_width(h)))
    return " ".join(lab), " ".join(rec)


def read_text(path: str) -> Dict[str, str]:
    """Read a Kaldi text file into ``{key: transcript}`` (insertion ordered); a bare key is an empty transcript."""
    table: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.strip().split(maxsplit=1)
                if not parts:
                    continue
                key = parts[0]
                if key in table:
                    raise ValueError(f"{path}:{lineno}: duplicate utterance key {key!r}")
                table[key] = parts[1] if len(parts) > 1 else ""
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 ({e})") from None
    return table


def read_ignore_words(path: Optional[str], case_sensitive: bool) -> Set[str]:
    if not path:
        return set()
    with open(path, encoding="utf-8") as f:
        words = {w for line in f for w in line.split()}
    return words if case_sensitive else {w.upper() for w in words}


def score(ref: Dict[str, str], hyp: Dict[str, str], *, char: bool, case_sensitive: bool,
          ignore: Set[str], verbose: int, pad: str, out) -> Tuple[Counts, List[str], List[str]]:
    """Score every reference utterance, writing the per-utterance blocks; returns totals and key lists."""
    total = Counts()
    missing = [k for k in ref if k not in hyp]
    extra = [k for k in hyp if k not in ref]
    for key, ref_text in ref.items():
        ref_tokens = tokenize(ref_text, char=char, case_sensitive=case_sensitive, ignore=ignore)
        hyp_tokens = tokenize(hyp.get(key, ""), char=char, case_sensitive=case_sensitive, ignore=ignore)
        result = align(ref_tokens, hyp_tokens)
        total.add(result.counts)
        if verbose:
            lab, rec = aligned_lines(result.pairs, pad)
            out.write(f"utt: {key}\nWER: {result.counts}\nlab: {lab}\nrec: {rec}\n\n")
    return total, missing, extra


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--char", type=int, default=0, choices=[0, 1], help="score characters (1) or words (0)")
    parser.add_argument("--v", type=int, default=1, choices=[0, 1], help="print per-utterance alignments")
    parser.add_argument("--case_sensitive", "--cs", type=int, default=0, choices=[0, 1],
                        help="compare case-sensitively (default: upper-case both sides)")
    parser.add_argument("--ignore_words", "--ig", default=None, help="file of words to drop before scoring")
    parser.add_argument("--padding-symbol", "--padding_symbol", default="space", choices=["space", "underline"],
                        help="filler used to line up lab/rec tokens")
    parser.add_argument("ref", help="reference text file (key transcript)")
    parser.add_argument("hyp", help="hypothesis text file (key transcript)")
    args = parser.parse_args(argv)
    try:
        ref = read_text(args.ref)
        hyp = read_text(args.hyp)
        ignore = read_ignore_words(args.ignore_words, bool(args.case_sensitive))
    except (OSError, ValueError) as e:
        print(f"compute-wer.py: {e}", file=sys.stderr)
        return 1
    if not ref:
        print(f"compute-wer.py: {args.ref}: no utterances", file=sys.stderr)
        return 1
    out = sys.stdout
    total, missing, extra = score(ref, hyp, char=bool(args.char), case_sensitive=bool(args.case_sensitive),
                                  ignore=ignore, verbose=args.v, pad=" " if args.padding_symbol == "space" else "_",
                                  out=out)
    out.write(SEPARATOR + "\n")
    notes = []
    if missing:
        notes.append(f"Missing hypotheses: {len(missing)} of {len(ref)} reference utterances "
                     f"(scored as all deletions), e.g. {missing[0]}")
    if extra:
        notes.append(f"Hypotheses without reference: {len(extra)} (ignored), e.g. {extra[0]}")
    for note in notes:
        out.write(note + "\n")
        print(f"compute-wer.py: {note}", file=sys.stderr)
    out.write(f"Overall -> {total}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
