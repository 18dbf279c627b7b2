"""A hotword list of real words for the speed and no-harm measurements (docs/hotwords.md, "What does it cost?"):
``--count`` distinct words of ``--text`` (Kaldi ``text`` files or LibriSpeech ``*.trans.txt``: key, then words),
none of them in any ``--exclude`` file, chosen at random with a fixed seed and written one per line, sorted.

    python -m bench.hotword_list --text $(find ../shared/data/mini_librispeech -name '*.trans.txt') \
        --exclude data/train/text data/test/text --count 1000 --out hot1000_words.txt

Real words (Le et al.'s lists are a corpus's rare words) rather than random letter strings: a random string of one
to three letters matches inside almost every word, which measures a list no user writes.
"""
import argparse
import random
from typing import Iterable, Set

from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import UserError, run_cli


def words(paths: Iterable[str]) -> Set[str]:
    out: Set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                out.update(w for w in line.split()[1:] if w.isalpha())
    return out


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", nargs="+", required=True)
    parser.add_argument("--exclude", nargs="*", default=[])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=82)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    pool = sorted(words(args.text) - words(args.exclude))
    if len(pool) < args.count:
        raise UserError(f"--count {args.count}: only {len(pool)} words of --text are in no --exclude file")
    chosen = sorted(random.Random(args.seed).sample(pool, args.count))
    write_text(args.out, "".join(f"{w}\n" for w in chosen))
    print(f"{args.out}: {args.count} of {len(pool)} words")


if __name__ == "__main__":
    run_cli(main, "hotword_list.py")
