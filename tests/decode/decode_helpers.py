"""Audio written by the decode tests themselves: noise clips of a few lengths (an untrained model still emits
tokens on them, so texts differ between modes and settings) and their data.list."""
import json
from pathlib import Path
from typing import List

import numpy as np
import soundfile as sf

from tests.train.train_helpers import WORDS, make_model_dir


def write_clips(tmp_path: Path, n: int, sample_rate: int = 8000) -> List[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = tmp_path / f"utt{i}.wav"
        t = np.arange(int(sample_rate * (0.8 + 0.35 * i))) / sample_rate
        wav = 0.1 * rng.standard_normal(t.size) + 0.3 * np.sin(2 * np.pi * (200 + 150 * i) * t)
        sf.write(str(path), wav.astype(np.float32), sample_rate, subtype="PCM_16")
        paths.append(path)
    return paths


def write_list(paths: List[Path], path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, wav in enumerate(paths):
            f.write(json.dumps({"key": wav.stem, "wav": str(wav), "txt": WORDS[i % len(WORDS)]}) + "\n")
    return path


def read_hyps(path: Path) -> dict:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, text = line.partition(" ")
        out[key] = text
    return out


def make_exp(tmp_path: Path, clips: int) -> dict:
    """A one-epoch UDPS experiment dir with ``clips`` test clips and their data list: {dir, conf, ckpt, clips, list}."""
    conf, ckpt = make_model_dir(tmp_path, att_udps=True)
    paths = write_clips(tmp_path, clips)
    return {"dir": tmp_path, "conf": conf, "ckpt": ckpt, "clips": paths,
            "list": write_list(paths, tmp_path / "test.list")}


def streaming_exp(tmp_path: Path, clips: int) -> dict:
    """A model dir trained with dynamic chunks (so that ``stream`` runs too), ``clips`` clips and their data list,
    and the model loaded by the Python API: {dir, conf, ckpt, clips, list, model}."""
    import wenet_udps
    conf, ckpt = make_model_dir(tmp_path, chunks={"use_dynamic_chunk": True})
    paths = write_clips(tmp_path, clips)
    return {"dir": tmp_path, "conf": conf, "ckpt": ckpt, "clips": paths,
            "list": write_list(paths, tmp_path / "test.list"),
            "model": wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")}
