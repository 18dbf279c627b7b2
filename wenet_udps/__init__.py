"""wenet_udps: WeNet-style ASR toolkit whose every attention can be switched to UDPS from one YAML key."""
import os

# OpenMP threads that spin long while waiting collapse (an SDPA call: 1.6 ms -> 8 ms on 2 cores) as soon as another
# process, e.g. a DataLoader worker running torch ops, needs a core; threads that sleep at once
# (OMP_WAIT_POLICY=PASSIVE) make every small op pay a wake-up on free cores (a 160x128 linear: 0.036 -> 0.1 ms).
# A short spin avoids both (bench/omp_wait.py, docs/benchmarks.md). Must be set before torch loads OpenMP; a user's
# own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")

__all__ = ["udps_similarity", "build_model"]


def __getattr__(name):
    # Both pull in torch (build_model every model module); import them on first use so that `import wenet_udps`
    # stays light for the torch-free parts (wenet_udps.scoring behind tools/compute-wer.py).
    if name == "udps_similarity":
        from wenet_udps.kernels.reference import udps_similarity
        return udps_similarity
    if name == "build_model":
        from wenet_udps.model_builder import build_model
        return build_model
    raise AttributeError(f"module 'wenet_udps' has no attribute {name!r}")
