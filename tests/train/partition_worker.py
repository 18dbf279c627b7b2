"""One rank of the data-partition test (tests/test_run_sh_nodes.py), started by torchrun on each of two "nodes":
the keys of every batch the training loader yields (built by ``trainer.build_data``, DataLoader workers and all),
epoch by epoch; rank 0 writes every rank's keys to ``--out`` as JSON ``{epoch: [keys of rank 0, keys of rank 1,
...]}``."""
import argparse
import json

import torch
import yaml

from wenet_udps.train.distributed import cleanup, gather_objects, init_distributed
from wenet_udps.train.trainer import Run, build_data


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--config", "--train_data", "--data_type", "--out"):
        p.add_argument(name, required=True)
    p.add_argument("--num_workers", type=int, required=True)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    args.cv_data, args.device, args.prefetch = args.train_data, "cpu", 2
    torch.set_num_threads(1)
    info = init_distributed("gloo", "cpu", 60)
    with open(args.config, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    run = Run(args=args, info=info, device=torch.device("cpu"), config=config, seed=int(config["seed"]), dtype="fp32")
    (train_set, _), (train_loader, _), loader_gen = build_data(run)
    seen = {}
    for epoch in range(args.epochs):
        train_set.set_epoch(epoch)
        loader_gen.manual_seed(run.seed + epoch)
        seen[epoch] = gather_objects([key for batch in train_loader if "keys" in batch for key in batch["keys"]])
    if info.is_main:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(seen, f)
    cleanup()


if __name__ == "__main__":
    main()
