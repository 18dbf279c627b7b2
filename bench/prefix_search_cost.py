"""How the cost of ``ctc_prefix_beam_search`` grows with the utterance's length: seconds of search per second of audio.

    python -m bench.prefix_search_cost --seconds 20 40 80 160 320 --beam_size 10 --repeats 3

The search's cost depends on the emissions, not on how they were made, so no model is built: the emissions are
synthetic and peaky as a trained CTC model's are, (1, T, V) log-probabilities with T = seconds * 1000 / ``--frame_ms``
(40 ms: 10 ms features subsampled 4 times), a log-softmax of Gaussian noise (so every frame's top ``--beam_size``
units compete) with the blank raised by ``--peak`` on most frames and, every ``--token_every`` frames, a random one
of ``--units`` units raised instead (one token per 160 ms by default, about the rate of characters in speech;
sometimes held for two frames, as a spike of a trained model is). A random model instead emits a token nearly every
frame, which is not what a search of a recognised utterance meets.

One row per length: the frames, the best hypothesis's tokens, the search's seconds (median of ``--repeats``, by
``--clock``: ``cpu``, this process's CPU time, the default on a shared machine, or ``wall``), seconds per audio
second, and that over the first length's: flat when the cost is linear in the length. ``--hotwords N`` searches with
a context graph of N random phrases of 2-4 units (``--context_score``), the hotwords' path of the same search.
"""
import argparse
import random
import statistics
import time
from pathlib import Path
from typing import List, Optional

import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.search import ctc_prefix_beam_search
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli

from bench._harness import write_table

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def emissions(frames: int, units: int, token_every: int, peak: float, seed: int = 0) -> torch.Tensor:
    """(1, frames, units + 1) log-probabilities, blank 0: blank-heavy, a unit's spike every ``token_every`` frames."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(frames, units + 1, generator=g)
    spikes = torch.arange(0, frames, token_every)
    held = spikes[torch.rand(spikes.numel(), generator=g) < 0.3] + 1   # a spike held for a second frame
    token = torch.randint(1, units + 1, (spikes.numel(),), generator=g)
    on = torch.zeros(frames, dtype=torch.long)
    on[spikes] = token
    on[held[held < frames]] = on[held[held < frames] - 1]
    logits[torch.arange(frames), on] += peak   # (on is 0, the blank, where no token is)
    return logits.log_softmax(-1).unsqueeze(0)


def graph_of(count: int, units: int, score: float) -> Optional[ContextGraph]:
    """``count`` random phrases of 2-4 units (None for 0)."""
    if count == 0:
        return None
    rng = random.Random(0)
    phrases = {tuple(rng.randint(1, units) for _ in range(rng.randint(2, 4))) for _ in range(count)}
    return ContextGraph([(p, score) for p in sorted(phrases)])


def main(argv: Optional[List[str]] = None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, nargs="+", default=[20, 40, 80, 160, 320], help="audio lengths")
    parser.add_argument("--beam_size", type=int, default=10, help="the search's beam")
    parser.add_argument("--units", type=int, default=400, help="output units besides the blank")
    parser.add_argument("--frame_ms", type=float, default=40.0, help="milliseconds per encoder frame")
    parser.add_argument("--token_every", type=int, default=4, help="frames per token spike")
    parser.add_argument("--peak", type=float, default=8.0, help="how far a spike (or the blank) stands above the noise")
    parser.add_argument("--hotwords", type=int, default=0, help="random phrases in a context graph (0: none)")
    parser.add_argument("--context_score", type=float, default=1.5, help="the hotwords' score per unit")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each length (the median is given)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="the clock of the times")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if min(args.seconds) <= 0 or args.beam_size < 1 or args.units < 1 or args.token_every < 1 or args.repeats < 1:
        raise UserError("--seconds must be > 0 and --beam_size, --units, --token_every, --repeats >= 1")
    if not args.frame_ms > 0:
        raise UserError(f"--frame_ms must be > 0, got {args.frame_ms}")
    torch.set_num_threads(args.threads)
    clock, graph = CLOCKS[args.clock], graph_of(args.hotwords, args.units, args.context_score)
    lines = [f"| audio (s) | frames | tokens | search s ({args.clock}, median of {args.repeats}) | "
             f"s per audio s | ratio to {args.seconds[0]:g} s |", "|---|---|---|---|---|---|"]
    first = None
    for seconds in args.seconds:
        frames = max(1, int(round(seconds * 1000.0 / args.frame_ms)))
        logp = emissions(frames, args.units, args.token_every, args.peak)
        times, tokens = [], 0
        for _ in range(args.repeats):
            t0 = clock()
            tokens = len(ctc_prefix_beam_search(logp, torch.tensor([frames]), args.beam_size, context=graph)[0].tokens)
            times.append(clock() - t0)
        spent = statistics.median(times)
        rate = spent / seconds
        first = rate if first is None else first
        lines.append(f"| {seconds:g} | {frames} | {tokens} | {spent:.3f} | {rate:.4f} | {rate / first:.2f} |")
    write_table(lines, args.out)


if __name__ == "__main__":
    run_cli(main, "prefix_search_cost.py")
