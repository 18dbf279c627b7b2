#!/usr/bin/env python3
"""Normalise Kaldi text files in place as a recipe declares (run.sh stage 0, after recipes/<corpus>/prepare.sh): the
one text normaliser, ``wenet_udps/utils/text_norm.py``, which stage 2's units and LM and compute-wer apply too.

Usage: python tools/normalise_text.py --case upper --punctuation remove data/an4/train/text data/an4/dev/text ...
Prints one line of counts per file (lines whose case changed, punctuation marks removed, lines left empty). A file
is rewritten only when a line changes; ``--punctuation refuse`` (the default) leaves it as it is and is an error
naming its lines that hold punctuation (declare keep or remove).
"""
import argparse

from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.kaldi_files import read_table


def normalise_file(path: str, norm: text_norm.TextNorm) -> str:
    """Rewrite the Kaldi text ``path`` normalised (atomically; only when a line changes); the counts as a line."""
    table = read_table(path, key_name="utterance key", allow_empty_value=True)
    rows, counts = norm.lines(((lineno, value) for value, lineno in table.values()), path)
    if any(new != old for (_, new), (old, _) in zip(rows, table.values())):
        write_text(path, "".join(f"{key} {value}".rstrip() + "\n" for key, (_, value) in zip(table, rows)))
    return f"{path} (case {norm.case}, punctuation {norm.punctuation}): {counts.describe()}"


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    text_norm.add_arguments(parser)
    parser.add_argument("text_files", nargs="+", type=cli.existing_file, help="Kaldi text files (key transcript)")
    args = parser.parse_args(argv)
    norm = text_norm.from_args(args)
    for path in args.text_files:
        print(normalise_file(path, norm), flush=True)


if __name__ == "__main__":
    cli.run_cli(main, "normalise_text.py")
