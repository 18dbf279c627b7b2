"""Data pipeline: WeNet raw lists and shards, Kaldi features, augmentation, exact DDP partition, batching."""
from wenet_udps.dataset.audio import BadAudioError, load_audio, resample, speed_perturb
from wenet_udps.dataset.features import compute_fbank, compute_features, compute_mfcc, spec_aug, spec_sub, spec_trim
from wenet_udps.dataset.lists import partition, read_raw_list, read_shard_list

__all__ = ["init_dataset", "AsrDataset", "BadAudioError", "load_audio", "resample", "speed_perturb",
           "compute_fbank", "compute_mfcc", "compute_features", "spec_aug", "spec_sub", "spec_trim", "partition",
           "read_raw_list", "read_shard_list"]


def __getattr__(name):
    # The torch Dataset on first use: audio, features and lists load without torch (the sherpa-onnx runtime,
    # wenet_udps.export.sherpa_runtime, deploys without it).
    if name in ("AsrDataset", "init_dataset"):
        from wenet_udps.dataset import dataset
        return getattr(dataset, name)
    raise AttributeError(f"module 'wenet_udps.dataset' has no attribute {name!r}")
