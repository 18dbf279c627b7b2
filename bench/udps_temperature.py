"""Does a model's attention sharpen while it trains, and do UDPS's temperatures (alpha, beta) move?

    python bench/udps_temperature.py --exp_dirs exp/diag/a_sd_s1 exp/diag/a_ud_s1 --epochs 0,3,7 \
        --test_data data/fsdd_dv/dev/data.list --num_utts 40

Printed per model and epoch checkpoint: the mean effective alpha and beta of the encoder's and the decoder's UDPS
sites (nothing for a scaled-dot model), and the mean row entropy (nats) of every encoder self-attention layer's
weights over the first ``--num_utts`` utterances of ``--test_data``. A row spread evenly over T frames has entropy
log T (about 3.2-3.8 for FSDD's utterances at 80 ms frames); a focused one is near 0. docs/fsdd_generalisation.md
uses it to show that UDPS's attention stays near uniform under augmentation when its temperature starts at 5.
"""
import argparse
import os
import tempfile
from typing import Dict, List

import torch

from wenet_udps.bin.plot_attention import collect
from wenet_udps.bin.recognize import load_experiment
from wenet_udps.transformer.attention import MultiHeadedAttention


def temperatures(model: torch.nn.Module) -> Dict[str, float]:
    """Mean effective alpha/beta over the encoder's and the decoder's UDPS modules ({} for scaled-dot)."""
    values: Dict[str, List[float]] = {}
    for name, module in model.named_modules():
        if not isinstance(module, MultiHeadedAttention):
            continue
        part = name.split(".")[0]
        for which, value in module.effective_scales().items():
            values.setdefault(f"{part}.{which}", []).append(float(value.mean()))
    return {key: sum(v) / len(v) for key, v in sorted(values.items())}


def head_of_list(test_data: str, num_utts: int, out_dir: str) -> str:
    """The first ``num_utts`` lines of a data.list, as a new list file in ``out_dir``."""
    with open(test_data, encoding="utf-8") as f:
        lines = [line for _, line in zip(range(num_utts), f)]
    path = os.path.join(out_dir, "head.list")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exp_dirs", nargs="+", required=True)
    parser.add_argument("--epochs", default="0,3,7", help="comma-separated epoch checkpoints (epoch_N.pt)")
    parser.add_argument("--test_data", required=True)
    parser.add_argument("--num_utts", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        head = head_of_list(args.test_data, args.num_utts, tmp)
        for exp in args.exp_dirs:
            for epoch in args.epochs.split(","):
                checkpoint = f"epoch_{epoch}.pt"
                _, _, entropy = collect(exp, checkpoint, head, None)
                _, model = load_experiment(exp, checkpoint)
                temps = " ".join(f"{k}={v:.2f}" for k, v in temperatures(model).items()) or "(scaled-dot)"
                enc = " ".join(f"{entropy[s].mean():.2f}" for s in sorted(entropy) if s.startswith("encoder"))
                print(f"{os.path.basename(exp.rstrip('/'))} epoch {epoch}: {temps} | encoder entropy {enc}",
                      flush=True)


if __name__ == "__main__":
    main()
