"""Cost per chunk of a live stream (``model.stream``) from its first second to its tenth minute.

    python -m bench.stream_cost --conf conf/tiny_zh/train_u2pp_conformer.yaml --seconds 600 \
        --marks 1 10 60 300 600 --left_chunks 16 -1 --repeats 2 --threads 1 --out /tmp/stream_cost.md

A randomly initialised model built from ``--conf`` (any streaming conf: ``use_dynamic_chunk`` or
``static_chunk_size``; ``--override key=value`` as train's; its units are ``--units`` made-up characters and its
CMVN is left out, so no data is needed) decodes one stream of ``--seconds`` of audio, given in pieces of
``--piece_s`` (0.1 s, as the issue's microphone), ``partial()`` called after each piece as a live caption would.
The audio is a synthetic signal (stepping tones, gated, and light noise) at ``--input_rate`` (default the model's
rate; another one adds the streaming resampler), or ``--wav`` repeated to that length.

Each row is one ``--left_chunks`` setting at one mark of the stream: the milliseconds per encoded chunk over the
pieces of the ``--window_s`` seconds that end at that mark (every piece's ``accept_waveform`` and ``partial``,
by ``--clock``: ``cpu``, this process's CPU time, the default on a shared machine, or ``wall``), and its ratio to
the first mark's. ``--repeats`` runs each stream again; a row gives the median over the runs and the runs'
spread. The last lines give each run's real-time factor (time of the whole stream, ``finish`` included, over its
audio seconds, by the CPU clock and the wall clock) and ``finish``'s own time: the search of ``--mode`` over the
whole stream, once (``ctc_greedy_search`` by default; a random model emits a token nearly every frame, and
``ctc_prefix_beam_search`` over 10 minutes of that, prefixes of thousands of tokens, ran for more than 10 CPU
minutes on 2026-12-02 and was stopped). With ``left_chunks`` -1 every chunk
attends to every earlier one: its cost grows with the stream by the model's definition (WeNet's default),
shown beside a bounded left context, whose rows should stay flat.
"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import soundfile as sf
import torch

from wenet_udps.config import apply_overrides, finalize_config, load_config
from wenet_udps.decode.api import RecognitionModel
from wenet_udps.model_builder import build_model
from wenet_udps.text import write_symbol_table
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli

from bench._harness import write_table

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def build(conf: str, overrides: List[str], units: int, workdir: Path) -> RecognitionModel:
    """The conf's model, randomly initialised (seed 0), with ``units`` made-up units and no CMVN."""
    config = apply_overrides(load_config(conf), overrides)
    table = workdir / "units.txt"
    names = ["<blank>", "<unk>"] + [chr(0x4E00 + i) for i in range(units)] + ["<sos/eos>"]
    write_symbol_table({t: i for i, t in enumerate(names)}, str(table))  # the units writer (atomic)
    config["cmvn"], config["cmvn_conf"] = None, {}
    config = finalize_config(config, symbol_table=str(table))
    torch.manual_seed(0)
    model = build_model(config)
    model.eval()
    return RecognitionModel(config, model)


def audio(seconds: float, rate: int, wav: Optional[str]) -> np.ndarray:
    """(N,) float32 in [-1, 1]: ``wav`` repeated to ``seconds``, or the synthetic signal."""
    n = int(seconds * rate)
    if wav:
        data, file_rate = sf.read(wav, dtype="float32", always_2d=True)
        if file_rate != rate:
            raise UserError(f"--wav {wav}: {file_rate} Hz; give --input_rate {file_rate}")
        return np.resize(data[:, 0], n)
    t = np.arange(n) / rate
    tone = np.sin(2 * np.pi * (300 + 300 * np.floor(t * 4) % 900) * t) * (np.sin(2 * np.pi * 1.5 * t) > 0)
    return (0.3 * tone + 0.01 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)


def run_stream(model: RecognitionModel, wav: np.ndarray, rate: int, args, left: int, clock) -> Dict[str, object]:
    """One stream: per piece (its end in seconds, its time, the chunks it encoded), and the totals."""
    piece = max(1, int(round(args.piece_s * rate)))
    stream = model.stream(args.chunk_size, left_chunks=left, mode=args.mode)
    ends, times, chunks = [], [], []
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    for start in range(0, len(wav), piece):
        before, t0 = len(stream.outputs), clock()
        stream.accept_waveform(wav[start:start + piece], rate)
        stream.partial()
        times.append(clock() - t0)
        chunks.append(len(stream.outputs) - before)
        ends.append(min(start + piece, len(wav)) / rate)
    t0 = clock()
    stream.finish()
    finish = clock() - t0
    seconds = len(wav) / rate
    return {"ends": np.array(ends), "times": np.array(times), "chunks": np.array(chunks), "finish": finish,
            "rtf_cpu": (time.process_time() - start_cpu) / seconds, "rtf_wall": (time.perf_counter() - start_wall)
            / seconds}


def per_chunk_ms(run: Dict[str, object], mark: float, window: float) -> float:
    """Milliseconds per encoded chunk over the pieces that end in (mark - window, mark]."""
    ends = run["ends"]
    sel = (ends > mark - window - 1e-9) & (ends <= mark + 1e-9)
    chunks = int(run["chunks"][sel].sum())
    if chunks == 0:
        raise UserError(f"mark {mark:g} s: no chunk was encoded in the {window:g} s before it; widen --window_s")
    return 1000.0 * float(run["times"][sel].sum()) / chunks


def main(argv: Optional[List[str]] = None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conf", default="conf/tiny_zh/train_u2pp_conformer.yaml", help="a streaming train conf")
    parser.add_argument("--override", nargs="*", default=[], help="key=value overrides of the conf, as train's")
    parser.add_argument("--units", type=int, default=400, help="made-up output units (the CTC layer's size)")
    parser.add_argument("--seconds", type=float, default=600.0, help="length of the stream")
    parser.add_argument("--marks", type=float, nargs="+", default=[1, 10, 60, 300, 600],
                        help="seconds into the stream at which the cost per chunk is given")
    parser.add_argument("--window_s", type=float, default=1.0, help="seconds of pieces averaged at each mark")
    parser.add_argument("--piece_s", type=float, default=0.1, help="seconds of audio per accept_waveform call")
    parser.add_argument("--chunk_size", type=int, default=4, help="decoding chunk size (encoder frames)")
    parser.add_argument("--left_chunks", type=int, nargs="+", default=[16, -1], help="left chunks (-1: all)")
    parser.add_argument("--mode", default="ctc_greedy_search", help="the search finish runs")
    parser.add_argument("--input_rate", type=int, default=None, help="the audio's rate (default: the model's)")
    parser.add_argument("--wav", default=None, help="a recording to repeat instead of the synthetic signal")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each stream")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="the clock of the per-chunk times")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if max(args.marks) > args.seconds or min(args.marks) <= 0:
        raise UserError(f"--marks must lie in (0, --seconds {args.seconds:g}], got {args.marks}")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = build(args.conf, args.override, args.units, Path(tmp))
    rate = args.input_rate or model.sample_rate
    wav = audio(args.seconds, rate, args.wav)
    clock = CLOCKS[args.clock]
    run_stream(model, wav[:2 * rate], rate, args, args.left_chunks[0], clock)  # warm-up: first-call allocations
    runs = {left: [] for left in args.left_chunks}
    for _ in range(args.repeats):
        for left in args.left_chunks:  # the settings alternate: a machine that slows down slows both
            runs[left].append(run_stream(model, wav, rate, args, left, clock))
    lines = [f"| left_chunks | mark (s) | ms per chunk ({args.clock} clock, median of {args.repeats}) | runs' range | "
             f"ratio to {args.marks[0]:g} s |", "|---|---|---|---|---|"]
    for left, results in runs.items():
        first = None
        for mark in args.marks:
            values = [per_chunk_ms(r, mark, min(args.window_s, mark)) for r in results]
            ms = statistics.median(values)
            first = ms if first is None else first
            lines.append(f"| {left} | {mark:g} | {ms:.2f} | {min(values):.2f}-{max(values):.2f} | {ms / first:.2f} |")
    write_table(lines, args.out)
    for left, results in runs.items():
        for i, r in enumerate(results):
            print(f"left_chunks {left}, run {i + 1}: {args.seconds:g} s of audio, RTF {r['rtf_cpu']:.3f} (cpu) "
                  f"{r['rtf_wall']:.3f} (wall), finish {r['finish']:.2f} s, {int(r['chunks'].sum())} chunks")


if __name__ == "__main__":
    run_cli(main, "stream_cost.py")
