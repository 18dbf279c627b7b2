"""An LM's out-of-vocabulary rate on a (dev) text, with a warning above ``--max_oov``: an LM built for another
corpus shows here, before any decoding.

    python -m wenet_udps.bin.check_lm --lm data/lm/lm.arpa --text data/dev/text
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.lm.arpa import oov_rate, words_of_text
from wenet_udps.lm.binary import read_lm
from wenet_udps.lm.build import read_sentences
from wenet_udps.lm.search import is_char_lm
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", required=True, type=cli.existing_file, help="ARPA LM or KenLM binary (with its .words file)")
    p.add_argument("--text", required=True, type=cli.existing_file, help="Kaldi text (dev)")
    p.add_argument("--max_oov", type=cli.float_range(0.0, 1.0), default=0.1,
                   help="warn when more than this share of the text's words is not in the LM")
    return p


def main(argv: Optional[List[str]] = None) -> float:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    info = read_lm(args.lm)
    words = words_of_text((s for _, s in read_sentences(args.text, keyed=True)), is_char_lm(info.words))
    rate = oov_rate(set(info.words), words)
    print(f"OOV rate of {args.text} under {info.describe()}: {100 * rate:.1f} % of {len(words)} words", flush=True)
    if rate > args.max_oov:
        logging.warning("%.1f %% of the words of %s are not in the LM %s (more than %.0f %%): was it built for "
                        "another corpus?", 100 * rate, args.text, args.lm, 100 * args.max_oov)
    return rate


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.check_lm")
