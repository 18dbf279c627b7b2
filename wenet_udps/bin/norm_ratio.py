"""Where UDPS and cosine attention differ: r = |q|/|k| per UDPS site, layer and head over a data list (issue 81).

    python -m wenet_udps.bin.norm_ratio --config EXP/train.yaml --checkpoint EXP/avg_5.pt \\
        --test_data DATA/test/data.list --out EXP/norm_ratio.json [--max_utts N]

Per head UDPS = alpha cos(q, k) g(r), g(r) = 4 r / (1 + r)^2, r = |q|/|k|: cosine attention is UDPS with g = 1. The
model runs once over the list with teacher forcing (the reference transcript feeds the decoder) and every UDPS site
records, over its valid (unmasked, not padding) query-key pairs, the distribution of r, uniformly and weighted by
the attention the model puts on each pair: quantiles, the mean of g, the fractions with g < 0.9 and < 0.5, a
log-histogram (the definitions, and which norms the rel-pos variant uses: wenet_udps.decode.norm_ratio). Writes
``--out`` (JSON) and prints per site and layer the median r over heads, the mean g and the fraction g < 0.9. A model
with no UDPS site is refused.
"""
import os
from typing import Optional, Sequence

from wenet_udps.decode.norm_ratio import measure, table
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_json
from wenet_udps.utils.cli import run_cli
from wenet_udps.utils.schema import BATCH_SIZE_MAX, BATCH_WHY


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, type=cli.existing_file, help="the experiment's train.yaml")
    p.add_argument("--checkpoint", required=True, type=cli.existing_file, help="the weights (e.g. EXP/avg_5.pt)")
    p.add_argument("--test_data", required=True, type=cli.existing_file, help="data.list (or shard list) to run")
    p.add_argument("--data_type", choices=["raw", "shard"], default="raw")
    p.add_argument("--batch_size", type=cli.int_range(1, BATCH_SIZE_MAX, why=BATCH_WHY), default=8,
                   help="utterances per forward pass")
    p.add_argument("--max_utts", type=cli.int_range(1), default=None, help="stop after this many (default: all)")
    p.add_argument("--out", required=True, type=cli.output_file, help="the JSON file to write")
    return p


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = get_parser().parse_args(argv)
    result = measure(args.config, args.checkpoint, args.test_data, data_type=args.data_type,
                     batch_size=args.batch_size, max_utts=args.max_utts)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_json(args.out, result, indent=1)
    print(f"{args.out}: {result['utterances']} utterances of {args.test_data}")
    print(table(result), end="")


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.norm_ratio")
