#!/usr/bin/env python3
"""Train a sentencepiece model (WeNet's BPE recipe step) and write the units file.

Usage: python tools/train_bpe.py --text data/train/text --nbpe 5000 --bpe_mode unigram \
           --model_prefix data/lang_char/train_unigram5000 --units data/lang_char/train_unigram5000_units.txt
--text is a Kaldi text file (key first; --no_keys for plain sentences). It is normalised as --case and --punctuation
declare (the recipe's: the one normaliser, wenet_udps/utils/text_norm.py; punctuation that is not declared is an
error naming the lines, not a unit). As WeNet does for LibriSpeech, the text is upper-cased by default (--case
upper) and the bpe tokenizer upper-cases its input the same way (tokenizer_conf.case). Writes <prefix>.model,
<prefix>.vocab and the units file (<blank> 0, <unk> 1, the pieces in sorted order, <sos/eos> last).
"""
import argparse
import logging
import os
import re
import tempfile

import sentencepiece as spm

from wenet_udps.text.base_tokenizer import write_symbol_table
from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.atomic import write_bytes
from wenet_udps.utils.counts import check_pass, counts_line
from wenet_udps.utils.kaldi_files import sentences


def sentencepiece_problem(message: str, text: str, nbpe: int) -> str:
    """sentencepiece's reason, on one line, naming the option it is about: ``--nbpe`` too high for ``text``, with
    the largest that fits where sentencepiece says it, or too low for its characters, with the smallest that fits
    (a model of single characters: for English, the letters and '▁')."""
    reason = cli.one_line(message)
    smallest = re.search(r"smaller than required_chars\. \d+ vs (\d+)", message)
    if smallest:
        return (f"--nbpe {nbpe} is too low for {text} (sentencepiece: {reason}); the smallest that fits is "
                f"--nbpe {smallest.group(1)}")
    largest = re.search(r"value <= (\d+)", message)
    if largest or "Vocabulary size" in message:
        fits = f"; the largest that fits is --nbpe {largest.group(1)}" if largest else ""
        return f"--nbpe {nbpe} is too high for {text} (sentencepiece: {reason}){fits}"
    return f"sentencepiece training on {text} failed: {reason}"


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", required=True, type=cli.existing_file, help="Kaldi text file (key transcript)")
    parser.add_argument("--no_keys", action="store_true", help="--text holds plain sentences (no key column)")
    parser.add_argument("--model_prefix", required=True, type=cli.output_file,
                        help="writes PREFIX.model and PREFIX.vocab")
    parser.add_argument("--units", required=True, type=cli.output_file, help="units file to write")
    parser.add_argument("--nbpe", type=cli.positive_int, default=5000,
                        help="vocabulary size of the sentencepiece model")
    parser.add_argument("--bpe_mode", choices=("unigram", "bpe"), default="unigram")
    text_norm.add_arguments(parser, case="upper")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    rows, norm_counts = text_norm.from_args(args).lines(enumerate(sentences(args.text, keys=not args.no_keys), 1),
                                                        args.text)
    logging.info("%s normalised (case %s, punctuation %s): %s", args.text, args.case, args.punctuation,
                 norm_counts.describe())
    lines = [sentence for _, sentence in rows]
    used = [sentence for sentence in lines if sentence.strip()]
    # the one rule of a pass (wenet_udps.utils.counts): no transcript to learn from is exit 1 with the counts
    check_pass(f"{args.text}: {counts_line(len(used), {'empty transcript': len(lines) - len(used)})}",
               used=len(used), total=len(lines), unusable=0)
    os.makedirs(os.path.dirname(os.path.abspath(args.model_prefix)), exist_ok=True)
    # sentencepiece writes PREFIX.model and .vocab itself: into a scratch dir, then each copied atomically
    with tempfile.TemporaryDirectory() as scratch:
        corpus, prefix = os.path.join(scratch, "text"), os.path.join(scratch, "bpe")
        with open(corpus, "w", encoding="utf-8") as tmp:
            tmp.writelines(sentence + "\n" for sentence in used)
        try:
            spm.SentencePieceTrainer.train(
                input=corpus, model_prefix=prefix, vocab_size=args.nbpe, model_type=args.bpe_mode,
                character_coverage=1.0, input_sentence_size=100000000, unk_id=1, bos_id=-1, eos_id=-1,
                minloglevel=2)
        except RuntimeError as e:   # a user error (exit 2, one line): mostly a --nbpe the text cannot fill
            raise cli.UserError(sentencepiece_problem(str(e), args.text, args.nbpe)) from None
        for ext in (".model", ".vocab"):
            with open(prefix + ext, "rb") as f:
                write_bytes(args.model_prefix + ext, f.read())
    sp = spm.SentencePieceProcessor()
    sp.load(args.model_prefix + ".model")
    pieces = sorted(sp.id_to_piece(i) for i in range(sp.get_piece_size())
                    if not (sp.is_unknown(i) or sp.is_control(i)))
    table = write_symbol_table(pieces, args.units)
    logging.info("wrote %s.model and %s (%d units)", args.model_prefix, args.units, len(table))


if __name__ == "__main__":
    cli.run_cli(main, "train_bpe.py")
