#!/usr/bin/env python3
"""Pack a Kaldi data directory into WeNet shards (tar files of <key>.wav + <key>.txt) and write the shard list.

Usage: python tools/make_shard_list.py --num_utts_per_shard 1000 --num_threads 4 [--segments segments] \
           [--resample 16000] [--shuffle] [--prefix shards] data/train/wav.scp data/train/text \
           data/train/shards data/train/data.list
Without --segments/--resample the audio bytes are copied unchanged (keeping their extension); otherwise the
(cut and/or resampled) audio is written as 16-bit PCM WAV. Unreadable audio, and an uncut file larger than a
shard member may be (``lists.MAX_MEMBER_BYTES``), is left out with a warning.
"""
import argparse
import io
import logging
import os
import random
import tarfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import soundfile as sf
from tqdm import tqdm

from wenet_udps.dataset.audio import INT16_SCALE, BadAudioError, load_audio, resample
from wenet_udps.dataset.kaldi_data import read_utterances
from wenet_udps.dataset.lists import MAX_MEMBER_BYTES
from wenet_udps.utils import cli

Entry = Tuple[str, str, str, Optional[float], Optional[float]]  # key, path, text, start, end


def _audio_member(entry: Entry, target_sr: Optional[int]) -> Tuple[bytes, str]:
    key, path, _, start, end = entry
    if start is None and os.path.isfile(path) and os.path.getsize(path) > MAX_MEMBER_BYTES:
        # training skips such a member unread (lists.iterate_shard); reading it here would cost its float32 size
        raise BadAudioError(f"{path} has {os.path.getsize(path)} bytes, more than a shard member may have "
                            f"({MAX_MEMBER_BYTES}, wenet_udps.dataset.lists.MAX_MEMBER_BYTES)")
    if start is None and target_sr is None:
        load_audio(path, name=key)  # validate before copying the bytes unchanged
        with open(path, "rb") as f:
            return f.read(), Path(path).suffix.lstrip(".").lower() or "wav"
    wav, sr = load_audio(path, start, end, name=key)
    if target_sr is not None:
        wav, sr = resample(wav, sr, target_sr), target_sr
    buf = io.BytesIO()
    pcm = np.clip(np.round(wav), -INT16_SCALE, INT16_SCALE - 1).astype(np.int16)
    sf.write(buf, pcm, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue(), "wav"


def write_shard(entries: List[Entry], tar_path: str, target_sr: Optional[int]) -> int:
    """Write one tar; returns the number of utterances left out for bad audio."""
    bad = 0
    with tarfile.open(tar_path, "w") as tar:
        for entry in entries:
            try:
                audio, ext = _audio_member(entry, target_sr)
            except BadAudioError as e:
                logging.warning("leaving out %s: %s", entry[0], e)
                bad += 1
                continue
            for name, data in ((f"{entry[0]}.txt", entry[2].encode("utf-8")), (f"{entry[0]}.{ext}", audio)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return bad


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_utts_per_shard", type=cli.positive_int, default=1000)
    parser.add_argument("--num_threads", type=cli.non_negative_int, default=1, help="threads (0: one)")
    parser.add_argument("--prefix", default="shards", help="tar file name prefix")
    parser.add_argument("--segments", default=None, type=cli.existing_file, help="Kaldi segments file")
    parser.add_argument("--resample", type=cli.positive_int, default=None, help="resample audio to this rate (Hz)")
    parser.add_argument("--shuffle", action="store_true", help="shuffle utterances before sharding (seed 777)")
    parser.add_argument("wav_file", type=cli.existing_file)
    parser.add_argument("text_file", type=cli.existing_file)
    parser.add_argument("shards_dir", type=cli.output_dir)
    parser.add_argument("shards_list", type=cli.output_file)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    entries = read_utterances(args.wav_file, args.text_file, args.segments)
    if args.shuffle:
        random.Random(777).shuffle(entries)
    os.makedirs(args.shards_dir, exist_ok=True)
    n = args.num_utts_per_shard
    chunks = [entries[i:i + n] for i in range(0, len(entries), n)]
    paths = [os.path.abspath(os.path.join(args.shards_dir, f"{args.prefix}_{i:09d}.tar")) for i in range(len(chunks))]
    with ThreadPoolExecutor(max_workers=max(1, args.num_threads)) as pool:
        futures = [pool.submit(write_shard, chunk, path, args.resample) for chunk, path in zip(chunks, paths)]
        bad = sum(f.result() for f in tqdm(as_completed(futures), total=len(futures), desc="shards", unit="shard"))
    with open(args.shards_list, "w", encoding="utf-8") as f:
        f.writelines(p + "\n" for p in paths)
    logging.info("wrote %d shards (%d utterances, %d left out for bad audio) listed in %s", len(paths),
                 len(entries) - bad, bad, args.shards_list)


if __name__ == "__main__":
    cli.run_cli(main, "make_shard_list.py")
