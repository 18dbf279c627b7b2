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

``--rescore_conf CONF`` also times what ``attention_rescoring`` adds after the search: the attention decoder of a
randomly initialised model built from CONF (as bench/stream_cost.py builds it, ``--units`` units) over the search's
n-best, with a random encoder output of the utterance's frames as its memory (the decoder's cost depends on the
lengths, not on the values): a column of its seconds and its share of search + rescoring. Its self-attention is
O(tokens^2) and its source attention O(tokens x frames) per hypothesis, by nature, and so is its memory: ten
hypotheses of 1000 tokens over 6000 frames hold about 1 GB of attention weights per layer.
"""
import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.search import attention_rescoring, ctc_prefix_beam_search
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli

from bench._harness import write_table
from bench.stream_cost import build

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
    parser.add_argument("--rescore_conf", default=None, help="also time attention_rescoring with this conf's model")
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
    model = None
    if args.rescore_conf:
        with tempfile.TemporaryDirectory() as tmp:
            model = build(args.rescore_conf, [], args.units - 1, Path(tmp)).model  # (ids 1 .. --units are its units)
    extra = (" rescoring s | rescoring share |", "---|---|") if model is not None else ("", "")
    lines = [f"| audio (s) | frames | tokens | search s ({args.clock}, median of {args.repeats}) | "
             f"s per audio s | ratio to {args.seconds[0]:g} s |" + extra[0], "|---|---|---|---|---|---|" + extra[1]]
    first = None
    for seconds in args.seconds:
        frames = max(1, int(round(seconds * 1000.0 / args.frame_ms)))
        logp = emissions(frames, args.units, args.token_every, args.peak)
        times, rescoring, lens = [], [], torch.tensor([frames])
        for _ in range(args.repeats):
            t0 = clock()
            found = ctc_prefix_beam_search(logp, lens, args.beam_size, context=graph)
            times.append(clock() - t0)
            if model is not None:
                memory = torch.randn(1, frames, model.encoder.output_size(), generator=torch.Generator().manual_seed(0))
                t0 = clock()
                attention_rescoring(model, found, memory, lens)
                rescoring.append(clock() - t0)
        spent = statistics.median(times)
        rate = spent / seconds
        first = rate if first is None else first
        row = f"| {seconds:g} | {frames} | {len(found[0].tokens)} | {spent:.3f} | {rate:.4f} | {rate / first:.2f} |"
        if model is not None:
            rescored = statistics.median(rescoring)
            row += f" {rescored:.3f} | {rescored / (rescored + spent):.2f} |"
        lines.append(row)
    write_table(lines, args.out)


if __name__ == "__main__":
    run_cli(main, "prefix_search_cost.py")
