#!/usr/bin/env python3
"""Compute WeNet global CMVN statistics: {"mean_stat": sum x, "var_stat": sum x^2 (per dim), "frame_num": N}.

Features are computed exactly as in training (dataset_conf feats_type/fbank_conf/mfcc_conf and
resample_conf.resample_rate of --train_config), but without dither and without augmentation.

Usage: python tools/compute_cmvn_stats.py --num_workers 2 --train_config conf/train.yaml \
           --in_scp data/train/wav.scp --out_cmvn data/train/global_cmvn
--in_scp takes a Kaldi wav.scp (with a ``segments`` file beside it, the segments) or a WeNet data.list (detected by
a first line starting with '{'; its start/end segments are honoured). Audio is read by the one reader, as in
training (``dataset_conf.channel`` picks the channel of multi-channel audio). Unreadable, cut or multi-channel audio
it refuses is skipped with a warning and counted; no readable audio, or more unreadable than
dataset_conf.max_bad_fraction, is an error (exit 1).
"""
import argparse
import logging
import multiprocessing
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from tqdm import tqdm

from wenet_udps.config import read_conf
from wenet_udps.dataset.audio import BadAudioError, load_audio, resample
from wenet_udps.dataset.features import compute_features
from wenet_udps.dataset.kaldi_data import scp_utterances
from wenet_udps.dataset.lists import read_raw_list
from wenet_udps.dataset.transforms import check_dataset_conf
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_json
from wenet_udps.utils.counts import check_pass, counts_line, max_bad_fraction
from wenet_udps.utils.kaldi_files import utf8_lines
from wenet_udps.utils.schema import ConfigError

Utt = Tuple[str, str, Optional[float], Optional[float]]


def feature_conf(train_config: Optional[str]) -> Tuple[Dict[str, Any], int, float, Optional[int]]:
    """(dataset_conf subset for compute_features with dither 0, sample rate, max_bad_fraction, channel) from a conf,
    read and checked as training reads it (``base:`` resolved: a child conf's features are its base's where it does
    not change them; ``dataset_conf.channel`` picks the channel of multi-channel audio, as in training)."""
    dataset_conf: Dict[str, Any] = {}
    if train_config:
        try:
            dataset_conf = check_dataset_conf(read_conf(train_config).get("dataset_conf"))
        except ConfigError as e:
            raise e.in_source(train_config) from None
    conf: Dict[str, Any] = {"feats_type": dataset_conf.get("feats_type", "fbank")}
    for key in ("fbank_conf", "mfcc_conf"):
        conf[key] = {**(dataset_conf.get(key) or {}), "dither": 0.0}
    rate = int((dataset_conf.get("resample_conf") or {}).get("resample_rate", 16000))
    return conf, rate, max_bad_fraction({"dataset_conf": dataset_conf}), dataset_conf.get("channel")


def read_inputs(path: str) -> List[Utt]:
    first = next((line.lstrip() for _, line in utf8_lines(path) if line.strip()), "")
    if first.startswith("{"):
        return [(s["key"], s["wav"], s.get("start"), s.get("end")) for s in read_raw_list(path)]
    return scp_utterances(path)  # a segments file beside it is cut: the stats of the audio that is trained on


def _stats(task: Tuple[List[Utt], Dict[str, Any], int, Optional[int]]
           ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], int, int]:
    utts, conf, rate, channel = task
    total = sq = None
    frames = bad = 0
    for key, path, start, end in utts:
        try:
            wav, sr = load_audio(path, start, end, name=key, channel=channel)
        except BadAudioError as e:
            logging.warning("skipping %s", e)
            bad += 1
            continue
        feat = compute_features(resample(wav, sr, rate), rate, conf).astype(np.float64)
        total = feat.sum(0) if total is None else total + feat.sum(0)
        sq = (feat ** 2).sum(0) if sq is None else sq + (feat ** 2).sum(0)
        frames += feat.shape[0]
    return total, sq, frames, bad


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_workers", type=cli.workers_int, default=1, help="processes (0: one)")
    parser.add_argument("--train_config", default=None, type=cli.existing_file,
                        help="train.yaml whose dataset_conf sets the features")
    parser.add_argument("--in_scp", required=True, type=cli.existing_file, help="wav.scp or data.list")
    parser.add_argument("--out_cmvn", required=True, type=cli.output_file, help="output JSON (WeNet global_cmvn)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    conf, rate, max_bad, channel = feature_conf(args.train_config)
    utts = read_inputs(args.in_scp)
    chunk = max(1, min(64, len(utts) // (4 * max(1, args.num_workers)) or 1))
    tasks = [(utts[i:i + chunk], conf, rate, channel) for i in range(0, len(utts), chunk)]
    total = sq = None
    frames = bad = 0
    bar = tqdm(total=len(utts), desc="cmvn", unit="utt")
    with multiprocessing.get_context("fork").Pool(max(1, args.num_workers)) as pool:
        for (t, s, n, b), task in zip(pool.imap(_stats, tasks), tasks):
            if t is not None:
                total = t if total is None else total + t
                sq = s if sq is None else sq + s
            frames += n
            bad += b
            bar.update(len(task[0]))
    bar.close()
    # the one rule of a pass (wenet_udps.utils.counts): no audio read, or too much unreadable, is exit 1
    logging.info("%s", check_pass(f"cmvn data {args.in_scp}: {counts_line(len(utts) - bad, {'bad_audio': bad})}",
                                  used=len(utts) - bad, total=len(utts), unusable=bad, max_bad_fraction=max_bad))
    write_json(args.out_cmvn, {"mean_stat": total.tolist(), "var_stat": sq.tolist(), "frame_num": frames})
    logging.info("wrote %s: %d frames of dim %d from %d utterances", args.out_cmvn, frames, len(total),
                 len(utts) - bad)


if __name__ == "__main__":
    cli.run_cli(main, "compute_cmvn_stats.py")
