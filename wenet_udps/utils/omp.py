"""OpenMP waiting for training processes (torch-free: it must run before torch loads OpenMP).

libgomp's default keeps an idle OpenMP thread spinning for a long time. Beside another busy process, e.g. a
DataLoader worker computing features, those spinning threads collapse (an SDPA call: 1.6 ms -> 8 ms on 2 cores);
``OMP_WAIT_POLICY=PASSIVE`` makes every small op pay a thread wake-up. A short spin avoids both while training
(the removed probe omp_wait.py of 114a714, docs/benchmarks.md "Which OpenMP wait policy does a process use?").
Decoding keeps libgomp's default: it alternates small ops with Python search code on free cores, where a short
spin puts the thread to sleep between ops (stage 5's four modes: 1.9 s -> 1.35 s with the default, same page).
"""
import os


def short_spin() -> None:
    """Set ``GOMP_SPINCOUNT=1000`` unless the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``.

    Call before the first ``import torch`` of the process; later it changes nothing in this process (only in the
    processes it starts).
    """
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "1000")
