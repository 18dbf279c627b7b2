#!/usr/bin/env python3
"""Pack a Kaldi data directory into WeNet shards (tar files of <key>.wav + <key>.txt) and write the shard list.

Usage: python tools/make_shard_list.py --num_utts_per_shard 1000 --num_threads 4 [--segments segments] \
           [--resample 16000] [--shuffle] [--prefix shards] [--max_bad_fraction 0.05] data/train/wav.scp \
           data/train/text data/train/shards data/train/data.list
Without --segments/--resample the audio bytes are copied unchanged (keeping their extension) when the extension is
one of the audio formats the reader takes (``audio.AUDIO_EXTENSIONS``, also the shard reader's set); otherwise the
(cut, resampled or renamed) audio is written as 16-bit PCM WAV, so a file the raw list decodes is decoded from the
shard too. Every channel is packed: the reader of the shard chooses one by ``dataset_conf.channel``, as it does for
the file. Audio the reader refuses (unreadable, cut, or of a format whose length is not checked:
``audio_length``), and an uncut file larger than a shard member may be (``lists.MAX_MEMBER_BYTES``), is left out
with a warning and counted; so is an utterance with an empty transcript. More unusable ones (unreadable audio, empty
transcripts) than --max_bad_fraction is exit 1, and no shard list is written.
"""
import argparse
import io
import logging
import os
import random
import tarfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import soundfile as sf
from tqdm import tqdm

from wenet_udps.dataset.audio import AUDIO_EXTENSIONS, INT16_SCALE, BadAudioError, read_frames, resample
from wenet_udps.dataset.kaldi_data import EMPTY_TRANSCRIPT, read_utterances
from wenet_udps.dataset.lists import MAX_MEMBER_BYTES
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import open_atomic, write_text
from wenet_udps.utils.counts import add_max_bad_fraction, check_pass, counts_line

Entry = Tuple[str, str, str, Optional[float], Optional[float]]  # key, path, text, start, end


def _audio_member(entry: Entry, target_sr: Optional[int]) -> Tuple[bytes, str]:
    key, path, _, start, end = entry
    if start is None and os.path.isfile(path) and os.path.getsize(path) > MAX_MEMBER_BYTES:
        # training skips such a member unread (lists.iterate_shard); reading it here would cost its float32 size
        raise BadAudioError(f"{path} has {os.path.getsize(path)} bytes, more than a shard member may have "
                            f"({MAX_MEMBER_BYTES}, wenet_udps.dataset.lists.MAX_MEMBER_BYTES)", "oversize_member")
    ext = Path(path).suffix.lstrip(".").lower()
    # validated as the raw path reads it; every channel is kept: the reader of the shard applies the channel policy
    # (dataset_conf.channel) as it does to the file
    wav, sr = read_frames(path, start, end, name=key)
    if start is None and target_sr is None and ext in AUDIO_EXTENSIONS:
        with cli.open_input(path, "rb") as f:  # copied unchanged, under an extension the shard reader takes as audio
            return f.read(), ext
    if target_sr is not None:
        wav, sr = resample(wav, sr, target_sr), target_sr
    buf = io.BytesIO()
    pcm = np.clip(np.round(wav), -INT16_SCALE, INT16_SCALE - 1).astype(np.int16)
    sf.write(buf, pcm, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue(), "wav"


def write_shard(entries: List[Entry], tar_path: str, target_sr: Optional[int]) -> Dict[str, int]:
    """Write one tar; returns the utterances left out: ``bad_audio`` (unreadable, as the audio reader decides)
    and ``oversize_member`` (larger than a shard member may be, as training decides)."""
    left_out = {"bad_audio": 0, "oversize_member": 0}
    with open_atomic(tar_path, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
        for entry in entries:
            try:
                audio, ext = _audio_member(entry, target_sr)
            except BadAudioError as e:
                logging.warning("leaving out %s: %s", entry[0], e)
                left_out[e.reason if e.reason in left_out else "bad_audio"] += 1
                continue
            for name, data in ((f"{entry[0]}.txt", entry[2].encode("utf-8")), (f"{entry[0]}.{ext}", audio)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return left_out


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_utts_per_shard", type=cli.positive_int, default=1000)
    parser.add_argument("--num_threads", type=cli.workers_int, default=1, help="threads (0: one)")
    parser.add_argument("--prefix", default="shards", help="tar file name prefix")
    parser.add_argument("--segments", default=None, type=cli.existing_file, help="Kaldi segments file")
    parser.add_argument("--resample", type=cli.positive_int, default=None, help="resample audio to this rate (Hz)")
    parser.add_argument("--shuffle", action="store_true", help="shuffle utterances before sharding (seed 777)")
    add_max_bad_fraction(parser, "utterances with unreadable audio or an empty transcript")
    parser.add_argument("wav_file", type=cli.existing_file)
    parser.add_argument("text_file", type=cli.existing_file)
    parser.add_argument("shards_dir", type=cli.output_dir)
    parser.add_argument("shards_list", type=cli.output_file)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    left_out: Dict[str, int] = {}
    entries = read_utterances(args.wav_file, args.text_file, args.segments, left_out)
    check_pass(f"{args.wav_file} + {args.text_file}: {counts_line(len(entries), left_out)}", used=len(entries),
               total=len(entries) + sum(left_out.values()), unusable=left_out.get(EMPTY_TRANSCRIPT, 0),
               max_bad_fraction=args.max_bad_fraction, setting="--max_bad_fraction")
    if args.shuffle:
        random.Random(777).shuffle(entries)
    os.makedirs(args.shards_dir, exist_ok=True)
    n = args.num_utts_per_shard
    chunks = [entries[i:i + n] for i in range(0, len(entries), n)]
    paths = [os.path.abspath(os.path.join(args.shards_dir, f"{args.prefix}_{i:09d}.tar")) for i in range(len(chunks))]
    with ThreadPoolExecutor(max_workers=max(1, args.num_threads)) as pool:
        futures = [pool.submit(write_shard, chunk, path, args.resample) for chunk, path in zip(chunks, paths)]
        with tqdm(as_completed(futures), total=len(futures), desc="shards", unit="shard") as bar:  # closed on error:
            results = [f.result() for f in bar]                                   # the error line starts a line
    skipped = {reason: sum(r[reason] for r in results) for reason in ("bad_audio", "oversize_member")}
    # the one rule of a pass (wenet_udps.utils.counts): no utterance packed, or too much unreadable audio, is
    # exit 1, before the shard list is written
    used = len(entries) - sum(skipped.values())
    logging.info("%s", check_pass(f"shards of {args.wav_file}: {counts_line(used, skipped)}", used=used,
                                  total=len(entries), unusable=skipped["bad_audio"],
                                  max_bad_fraction=args.max_bad_fraction, setting="--max_bad_fraction"))
    write_text(args.shards_list, "".join(p + "\n" for p in paths))
    logging.info("wrote %d shards (%d utterances) listed in %s", len(paths), used, args.shards_list)


if __name__ == "__main__":
    cli.run_cli(main, "make_shard_list.py")
