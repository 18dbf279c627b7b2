"""How large the absolute positions are against the input they are added to, at a model's encoder input.

    python bench/position_share.py --exp_dirs exp/sweep/abs_false exp/sweep/wh_false \
        --test_data data/tiny_zh/dev/data.list

``abs_pos`` adds the sinusoids to the subsampled features times sqrt(D); ``abs_pos_whisper`` adds them to the
features as they are. Printed per model: the encoding type, the mean per-frame norm of the (scaled) input and of the
positions, and their ratio, over the first batch of ``--test_data``. Positions a tenth of the input's norm are what
the small confs' source attention could not use to tell repeated words apart (docs/small_confs.md).
"""
import torch
from torch.utils.data import DataLoader

from _harness import probe_parser
from wenet_udps.bin.recognize import eval_dataset, load_experiment
from wenet_udps.transformer.embedding import PositionalEncoding, RelPositionalEncoding
from wenet_udps.text import init_tokenizer


@torch.no_grad()
def position_share(exp: str, checkpoint: str, test_data: str) -> tuple:
    """(encoding class name, mean input norm, mean position norm) at ``exp``'s encoder input."""
    config, model = load_experiment(exp, checkpoint)
    pos_enc = model.encoder.embed.pos_enc
    if not isinstance(pos_enc, PositionalEncoding) or isinstance(pos_enc, RelPositionalEncoding):
        raise SystemExit(f"{exp}: its encoder adds no positions to its input ({type(pos_enc).__name__})")
    seen = []
    handle = pos_enc.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    batch = next(iter(DataLoader(eval_dataset(config, init_tokenizer(config), test_data, 16), batch_size=None)))
    model.encoder(batch["feats"], batch["feats_lengths"])
    handle.remove()
    x = seen[0]
    positions = pos_enc.position_encoding(0, x.size(1), apply_dropout=False)
    input_norm = float((x * pos_enc.xscale).norm(dim=-1).mean())
    return type(pos_enc).__name__, input_norm, float(positions.norm(dim=-1).mean())


def main() -> None:
    args = probe_parser(__doc__, checkpoint="avg.pt").parse_args()
    for exp in args.exp_dirs:
        name, inp, pos = position_share(exp, args.checkpoint, args.test_data)
        print(f"{exp}: {name} input norm {inp:.1f} positions {pos:.1f} ratio {pos / inp:.3f}")


if __name__ == "__main__":
    main()
