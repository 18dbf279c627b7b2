"""Same seed, same machine: bitwise-identical weights for both variants, with the compiled UDPS kernel (the C++
extension, or the tiled kernel where it does not build), DataLoader workers and a resume in between
(docs/reproducibility.md)."""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from wenet_udps.kernels.dispatch import choose_udps_kernel
from tests.train.train_helpers import ROOT, WORDS, tiny_config, write_units

DIGITS_PER_UTT = 20
HEADS, BATCH = 8, 8
FRAME_SHIFT_S = 0.01
SUBSAMPLING = 4  # conv2d input layer of tiny_config


def _long_utterances(fsdd_dir: Path, out_dir: Path, count: int, offset: int) -> Path:
    """``count`` utterances of DIGITS_PER_UTT FSDD digits each: long enough that the encoder's self-attention runs
    a compiled kernel (the tiled one wants enough frames and scores per call)."""
    files = sorted(fsdd_dir.glob("*.wav"))[offset::4]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "data.list"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            picked = files[i * DIGITS_PER_UTT:(i + 1) * DIGITS_PER_UTT]
            audio = np.concatenate([sf.read(p, dtype="float32")[0] for p in picked])
            rate = sf.info(picked[0]).samplerate
            t = int(len(audio) / rate / FRAME_SHIFT_S / SUBSAMPLING) - 2
            q = torch.empty(BATCH, HEADS, t, 4)
            assert choose_udps_kernel(q, q, None, 0.0, True) in ("cpu_ext", "cpu_tiled"), "too short: eager kernel"
            wav = out_dir / f"utt{i}.wav"
            sf.write(wav, audio, rate)
            text = " ".join(WORDS[int(p.name.split("_")[0])] for p in picked)
            f.write(json.dumps({"key": f"utt{i}", "wav": str(wav), "txt": text}) + "\n")
    return path


def _train(exp: Dict, model_dir: Path, *extra: str) -> None:
    # Default thread count and num_workers 2 (run.sh's): the settings a user runs with.
    cmd = [sys.executable, "-m", "wenet_udps.bin.train", "--config", str(exp["conf"]), "--train_data",
           str(exp["train"]), "--cv_data", str(exp["cv"]), "--model_dir", str(model_dir), "--seed", "3",
           "--num_workers", "2", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WENET_UDPS_COMPILE", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch.compile failed" not in proc.stderr, "the compiled UDPS kernel did not run"


@pytest.mark.parametrize("att_udps", [False, True], ids=["scaled_dot", "udps"])
def test_same_seed_reruns_and_resume_are_bitwise_identical(tmp_path, fsdd_dir, att_udps):
    units = tmp_path / "units.txt"
    write_units(units)
    config = tiny_config(units, att_udps=att_udps, encoder="conformer", max_epoch=2, dropout=0.1, batch_size=BATCH)
    config["encoder_conf"]["attention_heads"] = HEADS
    config["log_interval"] = 100
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(config), encoding="utf-8")
    exp = {"conf": conf, "train": _long_utterances(fsdd_dir, tmp_path / "train", 16, 0),
           "cv": _long_utterances(fsdd_dir, tmp_path / "cv", 2, 3)}

    _train(exp, tmp_path / "a")
    _train(exp, tmp_path / "b")
    _train(exp, tmp_path / "c", "--override", "max_epoch=1")
    _train(exp, tmp_path / "c", "--checkpoint", "auto")
    weights = {run: torch.load(tmp_path / run / "final.pt", map_location="cpu", weights_only=False)["model"]
               for run in "abc"}
    for key, value in weights["a"].items():
        assert torch.equal(value, weights["b"][key]), f"rerun differs at {key}"
        assert torch.equal(value, weights["c"][key]), f"resumed run differs at {key}"
    # The runs trained: the weights moved from their initial values (the runs cannot agree by doing nothing).
    first = torch.load(tmp_path / "c" / "epoch_0.pt", map_location="cpu", weights_only=False)["model"]
    assert any(not torch.equal(first[k], v) for k, v in weights["a"].items())
