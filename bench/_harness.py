"""What the benchmark scripts share: the timing harness of the attention benchmarks (bench/attention.py,
attention_gpu.py, compile_cost.py), and the neighbour process of ``--neighbour`` (decode_speed.py, train_step.py).

Inputs are (B, H, T, d_k) with a key padding mask (lengths in [T/2, T], or all T: ``padding=False``); every
attention is called as ``fn(q, k, v, mask, *extra)``; ``interleaved_medians`` times implementations in rounds, each
round in a shuffled order, so that load from other processes hits all of them alike. Imported by the scripts beside
it (``python -m bench.<name>`` from the repository root); not a benchmark itself.
"""
import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Sequence

import torch

from wenet_udps.utils.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]
# Each neighbour stops by itself once this process is gone (its parent changes, or ``kill -0`` fails), so that a
# benchmark killed by a timeout or SIGKILL, where the ``finally`` below never runs, leaves no load behind.
_PARENT = os.getpid()
_MATMUL = (f"import os, torch\ntorch.set_num_threads(1)\na = torch.randn(512, 512)\n"
           f"while os.getppid() == {_PARENT}:\n    a @ a")
_SUITE = (f"while kill -0 {_PARENT} 2>/dev/null; do {sys.executable} -m pytest -q -x -p no:cacheprovider tests/kernels "
          "tests/transformer/test_attention.py >/dev/null 2>&1; done")
# The neighbour processes of --neighbour: argv, run from the repository root. ``busyloop``: one Python loop, one
# core; ``matmul``: torch 512x512 products on one thread (compute and memory traffic); ``suite``: the project's
# kernel and attention tests, ``pytest -x`` over and over (the mixed load of a test run; a pass under way when the
# benchmark dies finishes first); ``none``: alone.
NEIGHBOURS = {"none": None, "busyloop": [sys.executable, "-c", f"import os\nwhile os.getppid() == {_PARENT}: pass"],
              "matmul": [sys.executable, "-c", _MATMUL], "suite": ["bash", "-c", _SUITE]}
ALPHA = 10.0  # UDPS's alpha in every benchmark: k_num = 4 alpha k, as the attention modules pass it


def udps_call(kernel: Callable, **kernel_kwargs) -> Callable:
    """A UDPS kernel called as the attention module calls it: k_num = 4 alpha k, k_norm = |k| in float32."""
    def run(q, k, v, mask, *_):
        k_norm = torch.linalg.vector_norm(k, dim=-1, dtype=torch.float32)
        return kernel(q, (4.0 * ALPHA) * k, k_norm, v, mask=mask, **kernel_kwargs)
    return run


def make_inputs(batch: int, heads: int, t: int, d_k: int, dtype: torch.dtype = torch.float32,
                device: str = "cpu", seed: int = 0, padding: bool = True):
    """q, k, v, grad (B, H, T, d_k), key padding mask (B, 1, T) and lengths (B,) drawn in [T/2, T], one of them T.

    ``padding=False``: every length is T and the mask all True, which is what the encoder passes for a batch of equal
    lengths (``~make_pad_mask``): every implementation computes every score."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, grad = (torch.randn(batch, heads, t, d_k, generator=gen).to(device, dtype) for _ in range(4))
    lengths = torch.randint(t // 2, t + 1, (batch,), generator=gen)
    if not padding:
        lengths.fill_(t)
    lengths[0] = t
    mask = (torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)
    return q, k, v, grad, mask.to(device), lengths.to(device)


def step(fn: Callable, q, k, v, grad, mask, *extra, backward: bool) -> None:
    """One forward (under no_grad) or forward+backward of ``fn`` on fresh leaves."""
    if not backward:
        with torch.no_grad():
            fn(q, k, v, mask, *extra)
        return
    leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
    fn(*leaves, mask, *extra).backward(grad)


def interleaved_medians(impls: Dict[str, Callable], inputs: Sequence, backward: bool, repeats: int, seed: int,
                        names: Optional[Iterable[str]] = None, clock: Callable[[], float] = time.perf_counter,
                        cuda: bool = False) -> Dict[str, float]:
    """Median seconds per implementation over ``repeats`` rounds after one warm-up call each (which compiles)."""
    names = list(names if names is not None else impls)
    for name in names:
        step(impls[name], *inputs, backward=backward)
    times: Dict[str, list] = {name: [] for name in names}
    rng = random.Random(seed)
    for _ in range(repeats):
        order = list(names)
        rng.shuffle(order)
        for name in order:
            if cuda:
                torch.cuda.synchronize()
            start = clock()
            step(impls[name], *inputs, backward=backward)
            if cuda:
                torch.cuda.synchronize()
            times[name].append(clock() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


@contextlib.contextmanager
def neighbour(kind: str):
    """Run the ``kind`` neighbour (:data:`NEIGHBOURS`) while the block runs, in its own process group, which is
    stopped after."""
    if NEIGHBOURS[kind] is None:
        yield
        return
    proc = subprocess.Popen(NEIGHBOURS[kind], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    print(f"neighbour {kind}: pid {proc.pid}", flush=True)
    try:
        yield
    finally:
        if proc.poll() is not None:
            print(f"warning: neighbour {kind} exited early (status {proc.returncode}): part of the timing ran alone")
        os.killpg(proc.pid, signal.SIGTERM)  # the group: the suite's shell loop and its pytest
        proc.wait()


def write_table(lines: Sequence[str], out: Optional[Path]) -> None:
    """Print the Markdown table, and write it to ``out`` too when given."""
    table = "\n".join(lines)
    if out:
        write_text(out, table + "\n")
    print(table)

