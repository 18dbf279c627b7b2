"""An LM's out-of-vocabulary rate on a (dev) text, with a warning above ``--max_oov``: an LM built for another
corpus shows here, before any decoding (every decode with an LM warns the same way about its list's references:
``wenet_udps.lm.arpa.check_oov``).

    python -m wenet_udps.bin.check_lm --lm data/lm/lm.arpa --text data/dev/text
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.lm.arpa import MAX_OOV, check_oov
from wenet_udps.lm.binary import read_lm
from wenet_udps.lm.build import read_sentences
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", required=True, type=cli.existing_file, help="ARPA LM or KenLM binary (with its .words file)")
    p.add_argument("--text", required=True, type=cli.existing_file, help="Kaldi text (dev)")
    p.add_argument("--max_oov", type=cli.float_range(0.0, 1.0), default=MAX_OOV,
                   help="warn when more than this share of the text's words is not in the LM")
    return p


def main(argv: Optional[List[str]] = None) -> float:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    info = read_lm(args.lm)
    rate, words = check_oov(info, (s for _, s in read_sentences(args.text, keyed=True)), args.text, args.max_oov)
    print(f"OOV rate of {args.text} under {info.describe()}: {100 * rate:.1f} % of {words} words", flush=True)
    return rate


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.check_lm")
