"""wenet_udps: WeNet-style ASR toolkit whose every attention can be switched to UDPS from one YAML key."""
__all__ = ["udps_similarity", "build_model", "load_model"]


def __getattr__(name):
    # Both pull in torch (build_model every model module); import them on first use so that `import wenet_udps`
    # stays light for the torch-free parts (wenet_udps.scoring behind tools/compute-wer.py).
    if name == "udps_similarity":
        from wenet_udps.kernels.reference import udps_similarity
        return udps_similarity
    if name == "load_model":  # the Python API: load_model(exp_dir, checkpoint, device).transcribe(...)
        from wenet_udps.decode.api import load_model
        return load_model
    if name == "build_model":
        from wenet_udps.model_builder import build_model
        return build_model
    raise AttributeError(f"module 'wenet_udps' has no attribute {name!r}")
