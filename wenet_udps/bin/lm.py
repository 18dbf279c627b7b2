"""Word n-gram LMs for the ``*_lm`` decoding modes (needs ``tools/install.sh --lm true``).

    # build: the training transcripts (Kaldi text) plus more text, refusing any dev or test sentence
    python -m wenet_udps.bin.lm build --text data/train/text [--lm_text books.txt] \
        --held_out data/dev/text --held_out data/test/text --order 3 --out data/lm/lm.arpa
    # check an LM against a dev text: its out-of-vocabulary rate (warns above --max_oov)
    python -m wenet_udps.bin.lm check --lm data/lm/lm.arpa --text data/dev/text

``--char_lm`` builds a character LM (Mandarin: each character a word; the text needs no spaces).
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.lm.arpa import oov_rate, read_arpa, words_of_text
from wenet_udps.lm.build import build_arpa, read_sentences, refuse_held_out
from wenet_udps.lm.search import is_char_lm
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build an ARPA LM with lmplz")
    b.add_argument("--text", action="append", default=[], type=cli.existing_file,
                   help="Kaldi text (key words...) whose sentences the LM learns; repeatable")
    b.add_argument("--lm_text", action="append", default=[], type=cli.existing_file,
                   help="plain text, one sentence a line; repeatable")
    b.add_argument("--held_out", action="append", default=[], type=cli.existing_file,
                   help="Kaldi text (dev, test) none of whose sentences the LM text may contain; repeatable")
    b.add_argument("--order", type=cli.positive_int, default=3)
    b.add_argument("--prune", type=cli.non_negative_int, nargs="+", default=None,
                   help="lmplz --prune counts per order from the unigrams, e.g. 0 1 1")
    b.add_argument("--char_lm", action="store_true", help="a character LM (Mandarin)")
    b.add_argument("--out", required=True, type=cli.output_file)
    c = sub.add_parser("check", help="an LM's out-of-vocabulary rate on a text")
    c.add_argument("--lm", required=True, type=cli.existing_file)
    c.add_argument("--text", required=True, type=cli.existing_file, help="Kaldi text (dev)")
    c.add_argument("--max_oov", type=cli.float_range(0.0, 1.0), default=0.1,
                   help="warn when more than this share of the text's words is not in the LM")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    if args.command == "build":
        if not args.text and not args.lm_text:
            get_parser().error("build needs --text or --lm_text")
        sources = [(path, read_sentences(path, keyed=True)) for path in args.text]
        sources += [(path, read_sentences(path, keyed=False)) for path in args.lm_text]
        refuse_held_out(sources, args.held_out)
        info = build_arpa((s for _, sentences in sources for _, s in sentences), args.out, order=args.order,
                          prune=args.prune, char_lm=args.char_lm)
        print(f"wrote LM {info.describe()}, n-grams {' '.join(map(str, info.counts))}", flush=True)
        return 0
    info = read_arpa(args.lm)
    words = words_of_text((s for _, s in read_sentences(args.text, keyed=True)), is_char_lm(info.words))
    rate = oov_rate(set(info.words), words)
    print(f"OOV rate of {args.text} under {info.describe()}: {100 * rate:.1f} % of {len(words)} words", flush=True)
    if rate > args.max_oov:
        logging.warning("%.1f %% of the words of %s are not in the LM %s (more than %.0f %%): was it built for "
                        "another corpus?", 100 * rate, args.text, args.lm, 100 * args.max_oov)
    return 0


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.lm")
