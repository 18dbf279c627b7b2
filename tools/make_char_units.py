#!/usr/bin/env python3
"""Write a units file for the char tokenizer from a text file.

Usage: python tools/make_char_units.py [--split_with_space] [--non_lang_syms nls.txt] [--letters] [--no_keys] \
           data/train/text data/lang_char/units.txt
Tokens are split as the char tokenizer splits them (CJK characters, whole English words, '▁' for spaces unless
--split_with_space; --letters splits English words into letters instead), after the text is normalised as --case
and --punctuation declare (the recipe's: the one normaliser, wenet_udps/utils/text_norm.py; punctuation that is not
declared is an error naming the lines, not a unit). Output: <blank> 0, <unk> 1, the tokens in sorted order,
<sos/eos> last.
"""
import argparse
import logging

from wenet_udps.text.base_tokenizer import write_symbol_table
from wenet_udps.text.char_tokenizer import char_split
from wenet_udps.text.text_utils import read_non_lang_syms
from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.counts import check_pass, counts_line
from wenet_udps.utils.kaldi_files import sentences


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split_with_space", action="store_true", help="as tokenizer_conf.split_with_space")
    parser.add_argument("--non_lang_syms", default=None, type=cli.existing_file,
                        help="file of non-language symbols, one per line")
    parser.add_argument("--letters", action="store_true", help="split English words into letters")
    parser.add_argument("--no_keys", action="store_true", help="the text file holds plain sentences")
    text_norm.add_arguments(parser)
    parser.add_argument("text_file", type=cli.existing_file)
    parser.add_argument("units_file", type=cli.output_file)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    syms = read_non_lang_syms(args.non_lang_syms)
    tokens = set()
    rows, norm_counts = text_norm.from_args(args).lines(
        enumerate(sentences(args.text_file, keys=not args.no_keys), 1), args.text_file)
    logging.info("%s normalised (case %s, punctuation %s): %s", args.text_file, args.case, args.punctuation,
                 norm_counts.describe())
    lines = [sentence for _, sentence in rows]
    for sentence in lines:
        tokens.update(char_split(sentence, split_with_space=args.split_with_space, non_lang_syms=syms,
                                 letters=args.letters))
    used = sum(1 for sentence in lines if sentence.strip())
    # the one rule of a pass (wenet_udps.utils.counts): a text with no transcript would give a units file of the
    # special symbols only, which every later stage would take for a vocabulary
    check_pass(f"{args.text_file}: {counts_line(used, {'empty transcript': len(lines) - used})}", used=used,
               total=len(lines), unusable=0)
    table = write_symbol_table(sorted(tokens), args.units_file)
    logging.info("wrote %s (%d units)", args.units_file, len(table))


if __name__ == "__main__":
    cli.run_cli(main, "make_char_units.py")
