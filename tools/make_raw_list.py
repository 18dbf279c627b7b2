#!/usr/bin/env python3
"""Write a WeNet raw data.list (one JSON object per line: key, wav, txt[, start, end]).

Usage: python tools/make_raw_list.py [--segments data/train/segments] [--max_bad_fraction 0.05] \
           data/train/wav.scp data/train/text data/train/data.list
Utterances without audio, without text or with an empty transcript are left out with one warning giving the count
of each; when none is left, or more than --max_bad_fraction have an empty transcript (unusable data, as training
counts it), nothing is written and the exit status is 1.
"""
import argparse
import json
import logging
from typing import Dict

from wenet_udps.dataset.kaldi_data import EMPTY_TRANSCRIPT, read_utterances
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import open_atomic
from wenet_udps.utils.counts import add_max_bad_fraction, check_pass, counts_line


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", default=None, type=cli.existing_file,
                        help="Kaldi segments file (utt rec start end)")
    parser.add_argument("wav_file", type=cli.existing_file, help="wav.scp (key path)")
    parser.add_argument("text_file", type=cli.existing_file, help="text (key transcript)")
    parser.add_argument("output_file", type=cli.output_file, help="data.list to write")
    add_max_bad_fraction(parser, "utterances with an empty transcript")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    left_out: Dict[str, int] = {}
    entries = read_utterances(args.wav_file, args.text_file, args.segments, left_out)
    # the one rule of a pass (wenet_udps.utils.counts): an empty list is exit 1; keys only one file has are left
    # out by choice, empty transcripts are unusable (more than the limit: exit 1)
    check_pass(f"{args.wav_file} + {args.text_file}: {counts_line(len(entries), left_out)}", used=len(entries),
               total=len(entries) + sum(left_out.values()), unusable=left_out.get(EMPTY_TRANSCRIPT, 0),
               max_bad_fraction=args.max_bad_fraction, setting="--max_bad_fraction")
    with open_atomic(args.output_file) as out:
        for utt, wav, txt, start, end in entries:
            obj = {"key": utt, "wav": wav, "txt": txt}
            if start is not None:
                obj["start"], obj["end"] = start, end
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    logging.info("wrote %d utterances to %s", len(entries), args.output_file)


if __name__ == "__main__":
    cli.run_cli(main, "make_raw_list.py")
