"""Convert an ARPA word LM to a KenLM binary (``build_binary trie``), which the ``*_lm`` modes load without parsing
an ARPA file, and write its words file beside it (``OUT.words``: the ARPA's unigrams, which the lexicon decoder
spells and a binary keeps only as hashes, after a first line naming the binary's SHA-256 and size and the SHA-256
of the words, checked on every load). run.sh's LM stage runs it on every ARPA it builds or downloads.

    python -m wenet_udps.bin.binarize_lm --arpa data/lm/lm.arpa --out data/lm/lm.bin

``--verify`` converts nothing: it checks OUT and its words file as every load does (``read_lm``: the words bound
to this binary by hash, as many as its unigrams) and exits 0, or 2 naming what is wrong. run.sh's LM stage skips a
binary only when its stamp is current and the pair verifies, so a damaged pair (an edited words file, another binary
copied over) is written again rather than refused at decoding.
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.binary import read_lm, words_path, write_binary
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arpa", required=True, type=cli.existing_file, help="the ARPA LM to convert")
    p.add_argument("--out", required=True, type=cli.output_file, help="the KenLM binary to write (and OUT.words)")
    p.add_argument("--verify", action="store_true", help="only check OUT and OUT.words as a load does, write nothing")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    if args.verify:
        info = read_lm(args.out)
        if info.kind != "KenLM binary":
            raise LmError(f"{args.out}: not a KenLM binary ({info.kind}): write it with binarize_lm")
        print(f"verified LM {info.describe()} and its words {words_path(args.out)}", flush=True)
        return 0
    info = write_binary(args.arpa, args.out)
    print(f"wrote LM {info.describe()} and its words {words_path(args.out)}", flush=True)
    return 0


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.binarize_lm")
