"""Memory of the hotword graph (transformer/context_graph.py) against the phrases' total length: one line per list
size, random phrases of 1 to ``--longest`` units over ``--units`` units (letters: 26), seed fixed.

    python -m bench.hotword_memory --phrases 1000 2000 4000 8000

Prints the phrases, their total length in units, the graph's states (one per distinct unit prefix, the root
included), its bytes (``ContextGraph.nbytes``: containers, arrays, the step rows of ``context_table`` where they
fit) and bytes per unit of total length (docs/hotwords.md, "What does it cost?").
"""
import argparse
import random

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def random_phrases(count: int, units: int, longest: int, seed: int = 82):
    """``count`` distinct phrases of 1 to ``longest`` unit ids in [2, units + 2), score 3."""
    rng = random.Random(seed)
    out = set()
    while len(out) < count:
        out.add(tuple(rng.randrange(2, units + 2) for _ in range(rng.randint(1, longest))))
    return [(p, 3.0) for p in sorted(out)]


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phrases", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--units", type=int, default=26)
    parser.add_argument("--longest", type=int, default=6)
    args = parser.parse_args(argv)
    for count in args.phrases:
        phrases = random_phrases(count, args.units, args.longest)
        total = sum(len(p) for p, _ in phrases)
        graph = ContextGraph(phrases)
        rows = "with" if graph.arrays.rows is not None else "without"  # (made here, if the graph keeps them)
        print(f"{count} phrases, {total} units in all: {len(graph)} states, {graph.nbytes / 1e6:.2f} MB ({rows} "
              f"every state's step rows), {graph.nbytes / total:.0f} bytes per unit")


if __name__ == "__main__":
    run_cli(main, "hotword_memory.py")
