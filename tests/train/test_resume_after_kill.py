"""SIGKILL a training run mid-epoch, resume from its newest checkpoint, and get an uninterrupted run's weights."""
import os
import signal
import subprocess
import time

import torch

from wenet_udps.bin import train
from wenet_udps.train.checkpoint import load_checkpoint
from wenet_udps.train.checkpoint_files import latest_checkpoint
from tests.train.train_helpers import ROOT, make_experiment, train_cmd

ARGS = ("--override", "save_interval=3", "--override", "max_epoch=5", "--override", "log_interval=4",
        "--num_workers", "0")


def test_sigkill_mid_epoch_then_resume_matches_uninterrupted(tmp_path, fsdd_dir, one_thread):
    # dropout on, so the resumed run must also restore the RNG streams; 16 utterances / 2 = 8 steps per epoch.
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=16, n_cv=2, dropout=0.1, batch_size=2)
    killed_dir = tmp_path / "killed"
    proc = subprocess.Popen(train_cmd(exp, killed_dir, *ARGS), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=dict(os.environ, OMP_NUM_THREADS="1"))
    marker = killed_dir / "step_9.yaml"  # step 9 = second batch of epoch 1
    deadline = time.time() + 120
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert marker.exists() and not (killed_dir / "final.pt").exists()

    resume_from = latest_checkpoint(str(killed_dir))
    state = load_checkpoint(resume_from)
    assert state["step"] >= 9 and state["step"] < 40  # mid-training

    base = train_cmd(exp, killed_dir, *ARGS)[3:]  # drop "python -m wenet_udps.bin.train"
    train.main(base + ["--checkpoint", "auto"])
    train.main(train_cmd(exp, tmp_path / "straight", *ARGS)[3:])

    resumed = load_checkpoint(str(killed_dir / "final.pt"))
    straight = load_checkpoint(str(tmp_path / "straight" / "final.pt"))
    assert resumed["step"] == straight["step"] == 40
    for key, value in straight["model"].items():
        assert torch.equal(value, resumed["model"][key]), key
    for a, b in zip(straight["optimizer"]["state"].values(), resumed["optimizer"]["state"].values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"])
