#!/usr/bin/env python3
"""Biased-word error rates of a decoding against a biasing list: WER, U-WER (words not in the list), B-WER (words in
the list) by Le et al.'s definitions, and the list's phrase recall, precision and F1 (wenet_udps/scoring/biasing.py).

Usage: compute-biased-wer.py --biasing_list LIST | --biasing_lists LISTS [--char=0|1] [--cs=0|1] [--ig=FILE] [--rt=0|1]
                             [--missing=deletions|skip] [--case ...] [--punctuation ...] ref hyp > biased_wer

``LIST`` is a hotword file (one phrase a line; a `` :score`` at the end is ignored), read by the decoder's own
reader (``wenet_udps.decode.hotwords.read_lines``: a bad score or a typed ``▁`` refused naming the line); ``ref``
and ``hyp`` Kaldi-style text files as compute-wer.py takes them, with its options, its tokens and its alignment,
so WER here is its Overall. ``LISTS`` is a list per utterance (wenet_udps/scoring/context_lists.py: a line per utterance
of ``ref``, its key, then its phrases after tabs; a key ``ref`` lacks, or an utterance without a line, is refused naming
it): each utterance scored against its own, as Le et al. score with the rare words of each reference. The output, after
compute-wer's two binding lines::

    WER -> 8.77 % N=... C=... S=... D=... I=...
    U-WER -> 5.58 % N=... S=... D=... I=...
    B-WER -> 36.84 % N=... S=... D=... I=...
    Phrases -> recall 0.4700 precision 0.9800 F1 0.6353 (reference 187, hypothesis 90, matched 88)
"""
import argparse
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from wenet_udps.scoring import read_ignore_words, read_text
from wenet_udps.decode.hotwords import read_lines, split_line
from wenet_udps.scoring.biasing import score_biased
from wenet_udps.scoring.context_lists import check_keys, read_context_lists
from wenet_udps.scoring.bound import binding_lines
from wenet_udps.scoring.references import check_references
from wenet_udps.utils import cli, text_norm


def _compute_wer():
    """tools/compute-wer.py as a module: its parser's options and its normalisation are the ones used here."""
    spec = importlib.util.spec_from_file_location("compute_wer", Path(__file__).with_name("compute-wer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_parser() -> argparse.ArgumentParser:
    p = _compute_wer().get_parser()
    p.description = __doc__.split("\n\n")[0]
    p.prog = "compute-biased-wer.py"
    lists = p.add_mutually_exclusive_group(required=True)
    lists.add_argument("--biasing_list", type=cli.existing_file,
                       help="the biasing list (a hotword file: one phrase a line)")
    lists.add_argument("--biasing_lists", type=cli.existing_file,
                       help="a biasing list per utterance (a line per utterance: key, then its phrases after tabs)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    wer = _compute_wer()
    args = get_parser().parse_args(argv)
    refs, hyps = read_text(args.ref), read_text(args.hyp)
    ignore = read_ignore_words(args.ignore_words, bool(args.case_sensitive))
    if not refs:
        raise cli.UserError(f"{args.ref}: no utterances")
    check_references(refs, args.ref, hyps, args.hyp)
    norm = text_norm.from_args(args)
    if args.biasing_lists:
        lists = read_context_lists(args.biasing_lists)
        check_keys(lists, args.biasing_lists, refs, args.ref)
        phrases = {k: [norm(split_line(p, f"{args.biasing_lists}:{lineno}")[0]) for p in v]
                   for k, (lineno, v) in lists.items()}
    else:  # the decoder's reader (decode.hotwords): a list it refuses is refused here, naming the same line
        rows = read_lines(args.biasing_list)[1]
        if not rows:
            raise cli.UserError(f"{args.biasing_list}: no phrase (one a line)")
        phrases = [norm(text) for _, text, _ in rows]
    refs = wer.normalised(refs, args.ref, norm)
    hyps = wer.normalised(hyps, args.hyp, norm if norm.punctuation != "refuse" else replace(norm, punctuation="keep"))
    out = score_biased(refs, hyps, phrases, char=bool(args.char), case_sensitive=bool(args.case_sensitive),
                       ignore=ignore, remove_tags=bool(args.remove_tag), missing=args.missing)
    if out.report.total.N == 0:
        raise cli.UserError(f"{args.ref}: every reference is empty (after tag and ignore-word removal): the error "
                            f"rates are undefined")
    if out.biased.N == 0:
        print(f"compute-biased-wer.py: no reference word of {args.ref} is in "
              f"{args.biasing_list or args.biasing_lists}: B-WER is over no word", file=sys.stderr)
    sys.stdout.write("".join(line + "\n" for line in binding_lines(args.ref, args.hyp)))
    sys.stdout.write("".join(line + "\n" for line in out.lines()))
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "compute-biased-wer.py")
