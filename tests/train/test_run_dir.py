"""Checkpoints are data, experiment dirs are protected, broken checkpoints are skipped, runs are never mixed."""
import logging
import os
import subprocess

import pytest
import torch

from wenet_udps.bin import average_model
from wenet_udps.train.average import select_checkpoints
from wenet_udps.train.checkpoint import CheckpointError, load_checkpoint, load_model_state, load_newest_valid, \
    save_checkpoint
from wenet_udps.train.run_dir import RunDirError, RunLock, claim
from tests.train.train_helpers import ROOT, make_experiment, run_env, train_cmd


class Payload:
    """Unpickling this calls os.system: what a tampered "pretrained model" could carry."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _save(tmp_path, tag, run_id, step, w=0.0):
    return save_checkpoint(str(tmp_path), tag, {"model": {"w": torch.full((2,), w)}, "run_id": run_id},
                           {"epoch": step, "step": step, "run_id": run_id, "cv_loss": 1.0})


def test_checkpoint_with_a_pickled_callable_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "epoch_0.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Payload(marker)}, evil)
    (tmp_path / "epoch_0.yaml").write_text("epoch: 0\nstep: 0\ncv_loss: 1.0\n")
    with pytest.raises(CheckpointError, match="refused: it holds objects other than tensors"):
        load_checkpoint(str(evil))
    with pytest.raises(CheckpointError, match="refused"):
        load_model_state(torch.nn.Linear(2, 2), str(evil))
    with pytest.raises(CheckpointError, match="refused"):
        average_model.main(["--dst_model", str(tmp_path / "avg.pt"), "--src_path", str(tmp_path), "--num", "1"])
    assert not marker.exists()


def test_wenet_plain_state_dict_still_loads(tmp_path):
    state = torch.nn.Linear(3, 2).state_dict()  # an OrderedDict of tensors, as WeNet saves epoch_N.pt
    torch.save(state, tmp_path / "wenet.pt")
    loaded = load_checkpoint(str(tmp_path / "wenet.pt"))["model"]
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


def test_second_run_on_a_locked_dir_is_refused_naming_the_pid(tmp_path):
    lock = RunLock(str(tmp_path))
    with pytest.raises(RunDirError, match=f"in use by another training run \\(pid {os.getpid()}\\)"):
        RunLock(str(tmp_path))
    lock.release()
    RunLock(str(tmp_path)).release()  # free again once released (a killed process releases it too)


def test_claim_refuses_another_runs_checkpoints_unless_resumed_or_forced(tmp_path):
    _save(tmp_path, "epoch_0", "runA", 1)
    claim(str(tmp_path), "runA", force=False)  # resuming run A
    with pytest.raises(RunDirError, match="holds checkpoints of another run \\(epoch_0.pt.*--checkpoint auto.*--force"):
        claim(str(tmp_path), None, force=False)
    with pytest.raises(RunDirError):
        claim(str(tmp_path), "runB", force=False)
    claim(str(tmp_path), None, force=True)
    assert not list(tmp_path.glob("epoch_0.*"))


def test_truncated_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    _save(tmp_path, "epoch_0", "runA", 4, w=1.0)
    newest = _save(tmp_path, "step_6", "runA", 6, w=2.0)
    data = open(newest, "rb").read()
    open(newest, "wb").write(data[:len(data) // 2])
    with caplog.at_level(logging.WARNING):
        path, ckpt = load_newest_valid(str(tmp_path))
    assert path.endswith("epoch_0.pt") and torch.equal(ckpt["model"]["w"], torch.ones(2))
    assert any("step_6.pt" in r.message for r in caplog.records)


def test_averaging_refuses_checkpoints_of_two_runs(tmp_path):
    _save(tmp_path, "epoch_0", "runA", 1)
    _save(tmp_path, "epoch_1", "runB", 2)
    with pytest.raises(CheckpointError, match="2 different runs .*runB: epoch_1.pt; run runA: epoch_0.pt"):
        select_checkpoints(str(tmp_path), 2)
    assert len(select_checkpoints(str(tmp_path), 1)) == 1


def _train(exp, model_dir, *extra):
    return subprocess.run(train_cmd(exp, model_dir, "--override", "max_epoch=1", *extra), cwd=ROOT,
                          env=run_env(), capture_output=True, text=True, timeout=300)


def test_rerun_refused_then_resumed_with_checkpoint_auto(tmp_path, fsdd_dir):
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=4, n_cv=2)
    model_dir = tmp_path / "run"
    first = _train(exp, model_dir)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Epoch 0 (of 0..0) done" in first.stderr and "saved" in first.stderr
    assert (model_dir / "epoch_0.pt").exists() and (model_dir / "final.pt").exists()
    before = (model_dir / "epoch_0.pt").read_bytes()

    again = _train(exp, model_dir)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines()[-1].startswith("wenet_udps.bin.train: error: ")
    assert "holds checkpoints of another run" in again.stderr and "Traceback" not in again.stderr
    assert (model_dir / "epoch_0.pt").read_bytes() == before

    more = subprocess.run(train_cmd(exp, model_dir, "--override", "max_epoch=2", "--checkpoint", "auto"),
                          cwd=ROOT, env=run_env(), capture_output=True, text=True, timeout=300)
    assert more.returncode == 0, more.stderr[-2000:]
    assert "resuming from" in more.stderr and (model_dir / "epoch_1.pt").exists()
    assert load_checkpoint(str(model_dir / "epoch_1.pt"))["run_id"] == \
        load_checkpoint(str(model_dir / "epoch_0.pt"))["run_id"]
    assert os.path.samefile(model_dir / "final.pt", model_dir / "epoch_1.pt")


def test_user_errors_are_one_line_without_traceback(tmp_path, fsdd_dir):
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=4, n_cv=2)
    typo = _train(exp, tmp_path / "typo", "--override", "max_epochs=3")
    assert typo.returncode == 2 and "Traceback" not in typo.stderr
    assert typo.stderr.strip().splitlines()[-1] == (
        "wenet_udps.bin.train: error: --override max_epochs=3: max_epochs: unknown key (did you mean "
        "'max_epoch'?); valid keys: " + typo.stderr.split("valid keys: ")[1].strip())
    # every utterance unusable: an error naming the list and the reason, no untrained final.pt
    exp["train"].write_text("".join(line.replace('.wav"', '.missing.wav"') for line in open(exp["train"])))
    empty = _train(exp, tmp_path / "empty")
    assert empty.returncode == 1 and "Traceback" not in empty.stderr  # used nothing: exit 1 (utils.counts)
    last = empty.stderr.strip().splitlines()[-1]
    assert "epoch 0 train data" in last and str(exp["train"]) in last and "bad_audio 4" in last
    assert "no usable utterance" in last and not (tmp_path / "empty" / "final.pt").exists()


def test_restart_from_an_earlier_checkpoint_retires_the_later_timeline(tmp_path, fsdd_dir):
    """Issue 29: restarting a finished run from an early epoch must not let `auto` return to the old epochs."""
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=4, n_cv=2)
    model_dir = tmp_path / "run"
    first = _train(exp, model_dir, "--override", "max_epoch=3")
    assert first.returncode == 0, first.stderr[-2000:]
    old = {n: (model_dir / n).read_bytes() for n in ("epoch_1.pt", "epoch_2.pt")}
    # a modified checkpoint is refused by `train --checkpoint FILE` in one line, unless opted out
    bad = tmp_path / "bad.pt"
    data = bytearray((model_dir / "epoch_0.pt").read_bytes())
    data[len(data) // 2:len(data) // 2 + 256] = bytes(256)
    bad.write_bytes(bytes(data))
    (tmp_path / "bad.yaml").write_bytes((model_dir / "epoch_0.yaml").read_bytes())
    refused = _train(exp, tmp_path / "other", "--checkpoint", str(bad))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].endswith("(truncated or modified); pass --no_verify_checkpoint "
                                                              "to load it anyway")

    restart = _train(exp, model_dir, "--override", "max_epoch=2", "--checkpoint", str(model_dir / "epoch_0.pt"))
    assert restart.returncode == 0, restart.stderr[-2000:]
    assert "abandoned later timeline" in restart.stderr
    abandoned = [p for p in model_dir.iterdir() if p.name.startswith("abandoned_")]
    assert len(abandoned) == 1 and (abandoned[0] / "epoch_2.pt").read_bytes() == old["epoch_2.pt"]
    assert (abandoned[0] / "epoch_1.pt").read_bytes() == old["epoch_1.pt"]
    assert not (model_dir / "epoch_2.pt").exists() and os.path.samefile(model_dir / "final.pt",
                                                                        model_dir / "epoch_1.pt")
    auto = _train(exp, model_dir, "--override", "max_epoch=3", "--checkpoint", "auto")
    assert auto.returncode == 0, auto.stderr[-2000:]
    assert f"resuming from {model_dir / 'epoch_1.pt'}" in auto.stderr and "Epoch 2 (of 0..2) done" in auto.stderr
    assert (model_dir / "epoch_2.pt").read_bytes() != old["epoch_2.pt"]


def test_accum_grad_above_the_batches_of_an_epoch_is_an_error(tmp_path, fsdd_dir):
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=4, n_cv=2)  # batch_size 4: one batch per epoch
    proc = _train(exp, tmp_path / "run", "--override", "accum_grad=3", "--override", "att_udps=false",
                  "--override", "udps_conf.alpha_init=12")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "udps_conf is unused: this model has no UDPS attention" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "wenet_udps.bin.train: error: epoch 0: 1 batches and accum_grad 3: no optimizer step was taken; lower "
        "accum_grad or the batch size")
    assert not (tmp_path / "run" / "final.pt").exists()
