"""Look inside: attention weights of one test utterance per layer, and mean attention entropy per head.

    python -m wenet_udps.bin.plot_attention --exp_dirs exp/tiny_zh/train_conformer_scaled_dot \\
        exp/tiny_zh/train_conformer_udps --checkpoint avg_5.pt --test_data data/tiny_zh/test/data.list \\
        --out_dir exp/tiny_zh/plots

For each experiment the model runs once over the test list with teacher forcing (the reference transcript feeds
the decoder, as in training) and every attention site records its weights. Writes to ``--out_dir``:

- ``attention_<exp>.png``: one panel per site (encoder self-attention per layer, decoder self- and source
  attention per layer), the weights of the chosen utterance (``--utt``, default the first) averaged over heads.
- ``attention_entropy.png``: per site and head, the entropy of the weight rows in nats, averaged over the query
  rows of every utterance, one bar group per experiment. Low entropy = sharp attention. ``log(keys)`` would be
  uniform attention.
- ``attention_entropy.tsv``: the same numbers, one line per experiment, site and head.
- ``attention_entropy.md``, when experiments of one ``run.sh --seeds`` group are given (``<base>_seed<N>``, 2 or more
  seeds): per site, each group's head-mean entropy as mean ± std over seeds, and each group's difference from the
  scaled-dot group seed by seed, with a 95 % t-interval and the sign test (wenet_udps.results.entropy).

The weights are recomputed from each site's q, k (and positions) by the plain formulas (softmax of q.k/sqrt(d) with
the position terms for scaled-dot, of the UDPS scores for UDPS), so they are what the kernels compute.
"""
import os
from typing import Optional, Sequence

import torch

from wenet_udps.decode.attention_maps import collect, plot
from wenet_udps.results import entropy as entropy_table
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--exp_dirs", nargs="+", required=True, type=cli.existing_dir,
                   help="experiment dirs (train.yaml + checkpoint)")
    p.add_argument("--checkpoint", default="avg_5.pt", help="checkpoint file name inside each experiment dir")
    p.add_argument("--test_data", required=True, type=cli.existing_file, help="data.list of the test set")
    p.add_argument("--data_type", choices=["raw", "shard"], default="raw")
    p.add_argument("--utt", default=None, help="utterance key to draw (default: the first)")
    p.add_argument("--out_dir", required=True, type=cli.output_dir)
    return p


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    for d in args.exp_dirs:
        for name in ("train.yaml", args.checkpoint):
            if not os.path.isfile(os.path.join(d, name)):
                parser.error(f"--exp_dirs {d}: no {name} in it (--checkpoint names the weights file inside each)")
    with torch.no_grad():
        results = {os.path.basename(os.path.normpath(d)): collect(d, args.checkpoint, args.test_data, args.utt,
                                                                  args.data_type) for d in args.exp_dirs}
    paths = plot(results, args.out_dir)
    heads = {label: {site: values.tolist() for site, values in entropy.items()}
             for label, (_, _, entropy) in results.items()}
    paths.append(os.path.join(args.out_dir, "attention_entropy.tsv"))
    write_text(paths[-1], entropy_table.tsv(heads))
    table = entropy_table.seeds_table(heads)
    if table:
        paths.append(os.path.join(args.out_dir, "attention_entropy.md"))
        write_text(paths[-1], table)
    for path in paths:
        print(path)


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.plot_attention")
