#!/usr/bin/env python3
"""Write a WeNet raw data.list (one JSON object per line: key, wav, txt[, start, end]).

Usage: python tools/make_raw_list.py [--segments data/train/segments] data/train/wav.scp data/train/text \
           data/train/data.list
Utterances without audio or without text are left out with one warning giving the count.
"""
import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wenet_udps.dataset.kaldi_data import read_kaldi_map, read_segments, read_wav_scp  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", default=None, help="Kaldi segments file (utt rec start end)")
    parser.add_argument("wav_file", help="wav.scp (key path)")
    parser.add_argument("text_file", help="text (key transcript)")
    parser.add_argument("output_file", help="data.list to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    wavs = read_wav_scp(args.wav_file)
    texts = read_kaldi_map(args.text_file, allow_empty_value=True)
    if args.segments:
        entries = [(utt, rec, start, end) for utt, rec, start, end in read_segments(args.segments)]
    else:
        entries = [(key, key, None, None) for key in wavs]
    written = missing = 0
    with open(args.output_file, "w", encoding="utf-8") as out:
        for utt, rec, start, end in entries:
            if rec not in wavs or utt not in texts:
                missing += 1
                continue
            obj = {"key": utt, "wav": wavs[rec], "txt": texts[utt]}
            if start is not None:
                obj["start"], obj["end"] = start, end
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            written += 1
    if missing:
        logging.warning("%d utterances lack audio or text and were left out", missing)
    logging.info("wrote %d utterances to %s", written, args.output_file)


if __name__ == "__main__":
    main()
