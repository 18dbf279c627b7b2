#!/usr/bin/env python3
"""Word/character error rate, counted and printed exactly as WeNet's tools/compute-wer.py does.

Usage: compute-wer.py [--char=0|1] [--v=0|1] [--cs=0|1] [--ig=FILE] [--rt=0|1]
                      [--padding-symbol=space|underline] [--missing=deletions|skip] ref hyp > wer

``ref`` and ``hyp`` are Kaldi-style text files (``key transcript`` per line). The tokenisation rules (``--char``),
the alignment and the report layout are WeNet's (wenet_udps/scoring/ documents them); the last lines are
``Overall -> 4.61 % N=104765 C=... S=... D=... I=...`` and one such line per token cluster (Mandarin, English,
Number, Japanese, Other). Differences from WeNet's script:
- a reference utterance with no hypothesis counts as all deletions (``--missing=deletions``, the default);
  ``--missing=skip`` leaves it out as WeNet does. Either way a line before Overall (and stderr) says how many
  were missing, and how many hypotheses had no reference (ignored by both);
- a UTF-8 byte-order mark at the start of a file is dropped (WeNet reads it into the first key, so that
  utterance silently goes unscored);
- ``--case`` and ``--punctuation`` normalise both sides first with the recipe's declaration (the one normaliser,
  wenet_udps/utils/text_norm.py, that made the targets; run.sh passes them), so ``Zero,`` is ``ZERO`` under
  ``--punctuation remove``; the default ``keep``/``keep`` leaves the texts as WeNet scores them, but for their Unicode
  form: both sides are compared in the read form of the one normaliser (NFKC, format characters such as U+FEFF or a
  zero-width space removed), so ``CAFÉ`` with a combining accent is ``CAFÉ`` precomposed. What was changed is
  counted on stderr; ``--punctuation refuse`` refuses a mark in a reference (naming its line) and leaves one in a
  hypothesis as it is;
- a hypothesis file of our decoders (a ``decode.info`` beside it) is scored only against the references it was
  decoded with (wenet_udps.scoring.references): another set's or data dir's text is a user error naming both;
- duplicate keys, invalid UTF-8 and an empty reference file are errors; the key is the first whitespace-separated
  field of a line in both modes; WeNet's --maxw, --cluster and --splitfile options are not offered;
- the report starts with two lines binding it to what it scored, ``Scored hypotheses: HYP (SHA-256 ...)`` and
  ``Scored references: REF (SHA-256 ...)`` (absolute paths; wenet_udps.scoring.bound), and a third with the options
  that decide what a reference token is (``Scored with: char=0 ... ignore_words=none``): collect_results refuses a
  ``wer`` whose ``text`` beside it has changed since, an empty or partial one, and one whose N is not every token
  of its references (``--ig``, or ``--missing skip`` with hypotheses missing: a score by hand). Redirect into a
  temporary file and rename it (run.sh's stage 5 does), so that a failed run leaves no empty ``wer``.
"""
import argparse
import sys
from dataclasses import replace
from typing import Dict, Optional, Sequence

from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.kaldi_files import read_table
from wenet_udps.scoring import MISSING_POLICIES, notes, read_ignore_words, read_text, score, write_report
from wenet_udps.scoring.bound import binding_lines, options_line
from wenet_udps.scoring.references import check_references


def get_parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--char", type=int, default=0, choices=[0, 1], help="score characters (1) or words (0)")
    p.add_argument("--v", type=int, default=1, choices=[0, 1], help="per-utterance alignments and cluster lines")
    p.add_argument("--case_sensitive", "--cs", type=int, default=0, choices=[0, 1],
                   help="compare case-sensitively (default: upper-case both sides)")
    p.add_argument("--ignore_words", "--ig", default=None, type=cli.existing_file,
                   help="file of words to drop before scoring, one a line")
    p.add_argument("--remove_tag", "--rt", type=int, default=1, choices=[0, 1],
                   help="cut <...> tags such as <unk> and <noise> out of tokens before scoring")
    p.add_argument("--padding-symbol", "--padding_symbol", default="space", choices=["space", "underline"],
                   help="filler used to line up lab/rec tokens")
    p.add_argument("--missing", default="deletions", choices=list(MISSING_POLICIES),
                   help="reference utterances without hypothesis: all deletions (default) or skipped (WeNet)")
    text_norm.add_arguments(p, punctuation="keep")
    p.add_argument("ref", type=cli.existing_file, help="reference text file (key transcript)")
    p.add_argument("hyp", type=cli.existing_file, help="hypothesis text file (key transcript)")
    return p


def normalised(texts: Dict[str, str], path: str, norm: text_norm.TextNorm) -> Dict[str, str]:
    """``texts`` (read from ``path``) normalised as declared (punctuation refused: a UserError naming the lines); a
    line on stderr when anything changed."""
    line_of = {key: lineno for key, (_, lineno) in read_table(path, allow_empty_value=True).items()}
    rows, counts = norm.lines(((line_of[key], text) for key, text in texts.items()), path)
    if counts.changed:
        print(f"compute-wer.py: {path} normalised (case {norm.case}, punctuation {norm.punctuation}): "
              f"{counts.describe()}", file=sys.stderr)
    return dict(zip(texts, (text for _, text in rows)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    try:
        refs = read_text(args.ref)
        hyps = read_text(args.hyp)
        ignore = read_ignore_words(args.ignore_words, bool(args.case_sensitive))
    except (OSError, ValueError) as e:
        print(f"compute-wer.py: {e}", file=sys.stderr)
        return 1
    if not refs:
        print(f"compute-wer.py: {args.ref}: no utterances", file=sys.stderr)
        return 1
    check_references(refs, args.ref, hyps, args.hyp)   # what is scored is what was decoded: a user error otherwise
    norm = text_norm.from_args(args)
    refs = normalised(refs, args.ref, norm)
    # a hypothesis is scored as decoded: a mark in it came from a unit, and stage 2 refused or declared those
    hyps = normalised(hyps, args.hyp, norm if norm.punctuation != "refuse" else replace(norm, punctuation="keep"))
    report = score(refs, hyps, char=bool(args.char), case_sensitive=bool(args.case_sensitive), ignore=ignore,
                   remove_tags=bool(args.remove_tag), missing=args.missing)
    if report.total.N == 0:  # "0.00 %" over no reference token would hide every insertion
        print(f"compute-wer.py: {args.ref}: every reference is empty (after tag and ignore-word removal): the "
              f"error rate is undefined ({report.total.I} inserted tokens)", file=sys.stderr)
        return 1
    note_lines = notes(report, len(refs))
    for line in note_lines:
        print(f"compute-wer.py: {line}", file=sys.stderr)
    scored_with = options_line(char=bool(args.char), case_sensitive=bool(args.case_sensitive),
                               remove_tag=bool(args.remove_tag), missing=args.missing, case=norm.case,
                               punctuation=norm.punctuation, ignore_words=args.ignore_words)
    sys.stdout.write("".join(line + "\n" for line in binding_lines(args.ref, args.hyp) + [scored_with]))
    write_report(report, sys.stdout, verbose=bool(args.v), pad=" " if args.padding_symbol == "space" else "_",
                 note_lines=note_lines)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "compute-wer.py")
