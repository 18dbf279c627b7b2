"""Whole-model benchmark: one training step and decoding, scaled-dot vs UDPS (and any other attention family), for
the AISHELL-1 confs and the main job's (tiny_zh).

For each conf (``conf/aishell/train_conformer.yaml``, ``train_transformer.yaml``, ``conf/tiny_zh/
train_conformer.yaml``) one model per ``--families`` entry (default ``scaled_dot udps``; ``scaled_dot udps cosine``
adds cosine attention) is built from the same seed with ``att_family: <family>`` (every attention site of that
family), input_dim 80, output_dim 4233 and no CMVN. One training step is forward, backward and an Adam step on a
fixed random batch; the models are timed interleaved (in turn, the order reversed every repeat) and the medians
compared, each family's over the first (scaled-dot).
Decoding real-time factor (decode seconds / audio seconds, 10 ms frames) is measured per method with
``model.decode`` on the first batch in eval mode (median of interleaved repeats); for ``attention`` also per
decoder step, since the two untrained models stop the beam search after different numbers of steps.

    python -m bench.train_step --out docs/bench_train_step.md
    python -m bench.train_step --quick        # transformer only, short batches, 2 repeats, no decoding
    python -m bench.train_step --families scaled_dot cosine udps --confs conformer --no-decode --threads 1
    python -m bench.train_step --device cuda --dtype bf16 --confs conformer --no-decode --profile  # where it goes
    python -m bench.train_step --confs tiny_zh --batches 8x250 8x440 --threads 1   # the main job's conf and lengths
    python -m bench.train_step --confs mini_librispeech --data_list data/mini_librispeech/train/data.list \
        --threads 1 --clock cpu        # real batches: the shortest, median and longest 8 utterances of the list
    python -m bench.train_step --confs an4 --families scaled_dot cosine udps --data_list data/an4/train/data.list \
        --no-decode --threads 1 --clock cpu    # issue 81: the three families on AN4's conformer and utterances

``--neighbour`` (busyloop, matmul, suite: bench/_harness.py) times everything next to a process competing for the
cores, as ``bench/decode_speed.py --neighbour`` does; with ``--threads 2`` on 2 cores that oversubscribes them, the
"loaded machine" of issue 49 (docs/benchmarks.md, "Why was UDPS slower beside another job, and is it still?"):

    python -m bench.train_step --confs conformer --batches 4x400 --threads 2 --neighbour busyloop --no-decode

With ``--data_list`` the batches are real utterances of that list (the conf's fbank and units, no augmentation,
targets the real transcripts), 8 a batch as training sorts them: the shortest, the median and the longest 8 by
duration; the models then output the conf's vocabulary (its units file must exist: run.sh stages 0-3).
"""
import argparse
import functools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]

from wenet_udps.utils.omp import short_spin  # noqa: E402

short_spin()  # as training processes run, set before torch loads OpenMP
import os  # noqa: E402

import torch  # noqa: E402

from wenet_udps.config import read_conf  # noqa: E402
from wenet_udps.model_builder import build_model  # noqa: E402
from wenet_udps.utils.atomic import write_text  # noqa: E402

from bench._harness import NEIGHBOURS, neighbour  # noqa: E402
from bench._step_profile import profile_rows  # noqa: E402

CONFS = {"conformer": ROOT / "conf/aishell/train_conformer.yaml",
         "transformer": ROOT / "conf/aishell/train_transformer.yaml",
         "tiny_zh": ROOT / "conf/tiny_zh/train_conformer.yaml",  # the main job's conf (run.sh)
         "mini_librispeech": ROOT / "conf/mini_librispeech/train_conformer.yaml",
         "an4": ROOT / "conf/an4/train_conformer.yaml"}   # issue 81's conf (cosine vs UDPS)
# (utterances, frames): 8 utterances of 6 s and 4 of 20 s at 10 ms frames, as the project owner's measurements.
BATCHES = [(8, 600), (4, 2000)]
METHODS = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]
MODES = {"scaled-dot": "scaled_dot", "udps": "udps"}   # column -> family; --families replaces it
# The clock every timing reads (--clock): wall time, or this process's CPU time (steadier on a shared machine with
# --threads 1, where waiting for a core does not count).
CLOCK = [time.perf_counter]


def load_config(path: Path, family: str, output_dim: int = 4233) -> dict:
    config = read_conf(str(path))  # the one conf reader: base: resolved
    config["input_dim"], config["output_dim"] = 80, output_dim
    config.pop("cmvn", None)
    config.pop("cmvn_conf", None)
    config["att_udps"], config["att_family"] = None, family
    return config


def cells(values: Dict[str, float], fmt: str) -> str:
    """``| a | b | ... | b/a | ...``: each mode's value, then each mode's over the first (scaled-dot)."""
    first = next(iter(values.values()))
    return (" | ".join(format(v, fmt) + (" s" if fmt == ".2f" else "") for v in values.values()) + " | "
            + " | ".join(f"{v / first:.3f}" for v in list(values.values())[1:]))


def make_batch(utts: int, frames: int, seed: int) -> Tuple[torch.Tensor, ...]:
    """Random fbank-like features (B, T, 80) and character targets (about 4 per second, as Mandarin speech)."""
    gen = torch.Generator().manual_seed(seed)
    speech = torch.randn(utts, frames, 80, generator=gen)
    speech_lengths = torch.full((utts,), frames, dtype=torch.long)
    tokens = max(1, frames // 25)
    text = torch.randint(1, 4232, (utts, tokens), generator=gen)
    text_lengths = torch.full((utts,), tokens, dtype=torch.long)
    return speech, speech_lengths, text, text_lengths


def real_batches(conf: Path, data_list: Path, utts: int = 8) -> Tuple[int, List[Tuple[str, Tuple[torch.Tensor, ...]]]]:
    """(vocabulary size, [(label, batch)]): the shortest, median and longest ``utts`` utterances of ``data_list``
    by duration, each as one batch with the conf's features and units (wenet_udps.decode.data_list.eval_dataset)."""
    import soundfile as sf
    from torch.utils.data import DataLoader

    from wenet_udps.decode.data_list import eval_dataset
    from wenet_udps.config import load_config as read_conf
    from wenet_udps.text import init_tokenizer

    config = read_conf(str(conf))
    tokenizer = init_tokenizer(config)
    rows = [json.loads(line) for line in data_list.read_text(encoding="utf-8").splitlines() if line.strip()]
    order = sorted(rows, key=lambda r: sf.info(r["wav"]).duration)
    middle = max(0, len(order) // 2 - utts // 2)
    out = []
    for label, picked in (("shortest", order[:utts]), ("median", order[middle:middle + utts]),
                          ("longest", order[-utts:])):
        with tempfile.NamedTemporaryFile("w", suffix=".list", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in picked))
            f.flush()
            batch = next(iter(DataLoader(eval_dataset(config, tokenizer, f.name, utts), batch_size=None)))
        seconds = float(batch["feats_lengths"].float().mean()) / 100
        out.append((f"{label} {utts}, {seconds:.1f} s mean",
                    (batch["feats"], batch["feats_lengths"].long(), batch["target"].long(),
                     batch["target_lengths"].long())))
    return tokenizer.vocab_size(), out


def train_step(model, optimizer, batch, amp: Optional[torch.dtype] = None,
               scaler: Optional[torch.amp.GradScaler] = None) -> float:
    """Seconds of one step: forward (under autocast to ``amp`` if given), backward, optimizer step (through
    ``scaler`` if given, as fp16 training does); on CUDA synchronized before and after."""
    device = batch[0].device
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = CLOCK[0]()
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
        loss = model(*batch)["loss"]
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return CLOCK[0]() - start


def _count_decoder_steps(model) -> list:
    """A list that gets the seconds of every incremental decoder step of ``model`` (attention beam search)."""
    steps: list = []
    step = type(model.decoder).forward_one_step

    def timed(*args, **kwargs):
        start = CLOCK[0]()
        result = step(model.decoder, *args, **kwargs)
        steps.append(CLOCK[0]() - start)
        return result
    model.decoder.forward_one_step = timed
    return steps


def bench_conf(name: str, args) -> List[str]:
    if args.data_list:
        vocab, batches = real_batches(CONFS[name], args.data_list)
    else:
        vocab = 4233
        batches = [(f"{u} x {f / 100:.0f} s", make_batch(u, f, seed=u * f)) for u, f in args.batches]
    models, optims = {}, {}
    for mode, family in MODES.items():
        torch.manual_seed(0)
        models[mode] = build_model(load_config(CONFS[name], family, vocab)).to(args.device).train()
        optims[mode] = torch.optim.Adam(models[mode].parameters(), lr=1e-4)
    amp = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    scalers = {mode: torch.amp.GradScaler(args.device) if args.dtype == "fp16" else None for mode in MODES}
    rows = []
    for label, batch in batches:
        batch = tuple(x.to(args.device) for x in batch)
        times: Dict[str, List[float]] = {mode: [] for mode in MODES}
        for mode in MODES:  # warm-up
            train_step(models[mode], optims[mode], batch, amp, scalers[mode])
        for rep in range(args.repeats):
            order = list(MODES) if rep % 2 == 0 else list(reversed(MODES))
            for mode in order:
                times[mode].append(train_step(models[mode], optims[mode], batch, amp, scalers[mode]))
        # Load from other processes only adds time: the fastest repeat is the steadier estimate on a shared machine.
        for stat, fn in (("median", statistics.median), ("fastest", min)):
            t = {mode: fn(ts) for mode, ts in times.items()}
            rows.append(f"| {name} | train step ({stat}) | {label} | {cells(t, '.2f')} |")
            print(rows[-1], flush=True)
        if args.profile:
            # the profile compares two attentions: scaled-dot and the first other family
            steps = {mode: functools.partial(train_step, models[mode], optims[mode], batch, amp, scalers[mode])
                     for mode in list(MODES)[:2]}
            try:
                profiled = profile_rows(name, label, steps, cuda=args.device == "cuda")
            except Exception as exc:  # noqa: BLE001 - a profiler that fails must not cost the timings still to come
                profiled = [f"| {name} | profile failed: {type(exc).__name__}: {exc} | {label} | - | - | - |"]
            rows += profiled
            print("\n".join(profiled), flush=True)
    if args.decode:
        # The median batch of a real list (its typical length), else the first synthetic batch.
        label, batch = batches[1] if args.data_list else batches[0]
        speech, speech_lengths = (x.to(args.device) for x in batch[:2])
        audio_s = float(speech_lengths.sum()) / 100
        for method in METHODS:
            seconds: Dict[str, List[float]] = {mode: [] for mode in MODES}
            steps = {mode: _count_decoder_steps(models[mode].eval()) for mode in MODES}
            # The CTC weight only where it weighs (decode refuses an option a method ignores).
            extra = {"ctc_weight": 0.5} if method == "attention_rescoring" else {}
            with torch.no_grad():
                for mode in MODES:  # warm-up
                    models[mode].decode([method], speech, speech_lengths, beam_size=args.beam, **extra)
                    steps[mode].clear()
                # Interleaved as the train steps: a machine that slows down slows both modes alike.
                for rep in range(args.repeats):
                    for mode in (list(MODES) if rep % 2 == 0 else list(reversed(MODES))):
                        start = CLOCK[0]()
                        models[mode].decode([method], speech, speech_lengths, beam_size=args.beam, **extra)
                        seconds[mode].append(CLOCK[0]() - start)
            rtf = {mode: statistics.median(ts) / audio_s for mode, ts in seconds.items()}
            step_ms = {mode: sum(ts) * 1e3 / len(ts) if ts else None for mode, ts in steps.items()}
            rows.append(f"| {name} | RTF {method} | {label} | {cells(rtf, '.4f')} |")
            print(rows[-1], flush=True)
            if all(v is not None for v in step_ms.values()):
                # Untrained models stop the beam search after different numbers of steps; per step is comparable.
                rows.append(f"| {name} | {method}: ms per decoder step | {label} | {cells(step_ms, '.3g')} |")
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--confs", nargs="+", default=list(CONFS), choices=list(CONFS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam", type=int, default=10)
    parser.add_argument("--no-decode", dest="decode", action="store_false")
    parser.add_argument("--quick", action="store_true", help="transformer, 2 x 2 s batch, 2 repeats, no decoding")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"],
                        help="training-step precision: autocast bf16, or fp16 with a GradScaler")
    parser.add_argument("--batches", nargs="+", metavar="UTTSxFRAMES",
                        help="batches as utterances x 10 ms frames (default: 8x600 4x2000)")
    parser.add_argument("--data_list", type=Path, help="real batches from this data.list (see above)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time (steadier on a shared machine; use with --threads 1)")
    parser.add_argument("--neighbour", choices=list(NEIGHBOURS), default="none",
                        help="a process competing for the cores while timing (see the description)")
    parser.add_argument("--profile", action="store_true",
                        help="after timing each batch, one step per attention under torch.profiler: busy time and "
                             "the kernels that differ most (bench/_step_profile.py)")
    parser.add_argument("--families", nargs="+", default=list(MODES.values()), metavar="FAMILY",
                        help="attention families, one model each, scaled_dot first (default: scaled_dot udps)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from wenet_udps.transformer.attention import FAMILIES
    if args.families[0] != "scaled_dot" or any(f not in FAMILIES for f in args.families):
        parser.error(f"--families: scaled_dot first, then any of {', '.join(FAMILIES)}; got {' '.join(args.families)}")
    MODES.clear()
    MODES.update({FAMILIES[f].display if f == "scaled_dot" else f: f for f in args.families})
    args.batches = [tuple(int(n) for n in b.split("x")) for b in args.batches] if args.batches else BATCHES
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    if args.quick:
        args.confs, args.batches, args.repeats, args.decode = ["transformer"], [(2, 200)], 2, False
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    # libgomp's waiting decides what a parallel region costs on busy cores: part of the conditions.
    omp = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ)
    header = [f"torch {torch.__version__}, {where} ({omp or 'libgomp default'}), neighbour {args.neighbour}, "
              f"{args.clock} clock, train step {args.dtype}; median of "
              f"{args.repeats} interleaved repeats after one warm-up (train step: median and fastest repeat); "
              "ratio = each family / scaled-dot; ms per decoder step = time inside the decoder's incremental step "
              "only.", "",
              "| conf | what | batch | " + " | ".join(MODES) + " | "
              + " | ".join(("ratio" if len(MODES) == 2 else f"{m} / scaled-dot") for m in list(MODES)[1:]) + " |",
              "|" + "---|" * (3 + 2 * len(MODES) - 1)]
    print("\n".join(header), flush=True)  # then each row as it is measured: a run cut short leaves a table
    with neighbour(args.neighbour):
        rows = [row for name in args.confs for row in bench_conf(name, args)]
    table = "\n".join(header + rows)
    if args.out:
        write_text(args.out, table + "\n")
    print(table)


if __name__ == "__main__":
    main()
