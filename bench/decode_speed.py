"""Decoding time per model, steady state: each model decodes a data list in one mode, after one warm-up batch.

    python bench/decode_speed.py --exp_dirs exp/tiny_zh/train_conformer_scaled_dot exp/tiny_zh/train_conformer_udps \
        --test_data data/tiny_zh/test/data.list --mode attention --repeats 3 --threads 1

Prints one line per model: seconds for ``--repeats`` passes over the list (docs/benchmarks.md). The models are
decoded one after the other in this process, with the checkpoint ``--checkpoint`` of each experiment dir.
"""
import argparse
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from wenet_udps.bin.recognize import load_model
from wenet_udps.config import load_config
from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.dataset import eval_dataset_conf
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.search import DECODING_METHODS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp_dirs", nargs="+", required=True, help="experiment dirs (train.yaml + checkpoint)")
    parser.add_argument("--checkpoint", default="avg_5.pt", help="checkpoint file name in each dir")
    parser.add_argument("--test_data", required=True, help="data.list to decode")
    parser.add_argument("--mode", default="attention", choices=DECODING_METHODS)
    parser.add_argument("--beam_size", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for exp in args.exp_dirs:
        config = load_config(str(Path(exp) / "train.yaml"))
        model = load_model(config, str(Path(exp) / args.checkpoint))
        dataset = init_dataset("raw", args.test_data, init_tokenizer(config),
                               eval_dataset_conf(dict(config.get("dataset_conf") or {}), args.batch_size),
                               partition=False)
        batches = list(DataLoader(dataset, batch_size=None, num_workers=0))
        with torch.no_grad():
            model.decode([args.mode], batches[0]["feats"], batches[0]["feats_lengths"], args.beam_size)
            start = time.perf_counter()
            for _ in range(args.repeats):
                for b in batches:
                    model.decode([args.mode], b["feats"], b["feats_lengths"], args.beam_size)
        print(f"{exp}: {time.perf_counter() - start:.2f} s for {args.repeats} passes of {args.mode} "
              f"({len(batches)} batches, {args.threads} thread(s))")


if __name__ == "__main__":
    main()
