"""wenet_udps: WeNet-style ASR toolkit whose every attention can be switched to UDPS from one YAML key."""
import os

# OpenMP threads that spin while waiting collapse (100x slower small ops, measured on 2 cores) as soon as another
# process, e.g. a DataLoader worker computing fbank, needs a core. Must be set before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from wenet_udps.transformer.udps_ops import udps_similarity

__all__ = ["udps_similarity", "build_model"]


def __getattr__(name):
    # build_model pulls in every model module; import it on first use so `import wenet_udps` stays light.
    if name == "build_model":
        from wenet_udps.model_builder import build_model
        return build_model
    raise AttributeError(f"module 'wenet_udps' has no attribute {name!r}")
