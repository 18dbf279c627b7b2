"""tools/run_train.sh's functions (run.sh's stage 4), called in bash as run.sh calls them, with a stand-in training
(a python3 on PATH that writes what wenet_udps.bin.train writes: train.yaml and progress lines, over seconds)."""
import datetime
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The stand-in for `python3 -m wenet_udps.bin.train ARGS... MODEL_DIR`: the last argument is the model dir.
FAKE_TRAIN = """#!/usr/bin/env bash
exp=${@: -1}
echo "seed: 777" > "${exp}/train.yaml"
echo "07:00:00 WARNING progress: warning: scheduler_conf.warmup_steps 2000 is more than the 6 optimizer steps"
echo "07:00:00 INFO progress: epoch 0 of 0..1 done; train loss 9.00; cv loss 8.00; 1 s this epoch, about 1 s left"
sleep 2.5
echo "07:00:02 INFO Epoch 1 (of 0..1) done in 1.0s"
echo "07:00:02 INFO progress: epoch 1 of 0..1 done; train loss 7.00; cv loss 6.00; 1 s this epoch, last epoch"
"""


def stage4(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").write_text(FAKE_TRAIN)
    (bin_dir / "python3").chmod(0o755)
    return subprocess.run(["bash", "-c", f'set -euo pipefail; . tools/log.sh; . tools/run_train.sh; '
                                         f'PATH={bin_dir}:$PATH; cd {tmp_path}; {script}'],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def stamp(line: str) -> datetime.datetime:
    return datetime.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")


def test_background_trainings_show_their_progress_on_the_terminal(tmp_path):
    """Issue 57: stage 4 printed nothing for 15 minutes while two trainings ran side by side into their train.logs.
    Now each model's progress line (epoch, losses, time left) appears, timestamped and named, as its epoch ends;
    a resumed run's earlier lines are not printed again; the end names the seed that ran (train.yaml's)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "train.log").write_text("x INFO progress: epoch 5 of 0..9 done; the interrupted run's\n")
    proc = stage4(tmp_path, "cpu_jobs=2 cpu_threads=1 progress_poll=0.2; train_on_cpu a a; train_on_cpu b b; "
                            "wait_trainings")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    for exp in ("a", "b"):
        mine = [ln for ln in lines if f"stage 4 progress, {exp}: epoch " in ln]
        assert [re.sub(r".*stage 4 progress, \w: ", "", ln) for ln in mine] == [
            "epoch 0 of 0..1 done; train loss 9.00; cv loss 8.00; 1 s this epoch, about 1 s left",
            "epoch 1 of 0..1 done; train loss 7.00; cv loss 6.00; 1 s this epoch, last epoch"], proc.stderr
        trained = next(ln for ln in lines if f"stage 4: {exp} trained with seed 777 ({exp}/train.yaml)" in ln)
        # epoch 0's line came while the training still ran (2.5 s before its end), not after it
        assert (stamp(trained) - stamp(mine[0])).total_seconds() >= 1, proc.stderr
    assert "epoch 5" not in proc.stderr
    # a warning the training logs before its first epoch (a warm-up longer than the run) reaches the terminal too
    for exp in ("a", "b"):
        assert f"stage 4 progress, {exp}: warning: scheduler_conf.warmup_steps 2000 is more than" in proc.stderr


def test_one_model_trains_on_every_core_and_several_share_them(tmp_path):
    """Issue 68: a single model trained on nproc / --cpu_jobs threads and left cores idle. The count is nproc over
    the trainings that run at once (--cpu_jobs, or fewer models), OMP_NUM_THREADS when set."""
    cores = len(os.sched_getaffinity(0))
    counts = {}
    for runs, jobs in (("a", 2), ("a b", 2), ("a b c", 2), ("a b", 1)):
        proc = stage4(tmp_path / f"{jobs}_{runs.replace(' ', '')}",
                      f"unset OMP_NUM_THREADS; runs=({runs}); cpu_jobs={jobs}; train_threads")
        assert proc.returncode == 0, proc.stderr
        counts[runs, jobs] = int(proc.stdout)
    assert counts == {("a", 2): cores, ("a b", 2): max(1, cores // 2), ("a b c", 2): max(1, cores // 2),
                      ("a b", 1): cores}
    proc = stage4(tmp_path / "omp", "OMP_NUM_THREADS=3; runs=(a); cpu_jobs=2; train_threads")
    assert proc.stdout.strip() == "3"


def test_a_foreground_training_names_its_seed(tmp_path):
    """--cpu_jobs 1: the training's own log is the terminal; the stage's line after it names the seed that ran
    (issue 57: the run log said "seed none" for a model trained with the conf's seed 777)."""
    (tmp_path / "a").mkdir()
    proc = stage4(tmp_path, "cpu_jobs=1; train_on_cpu a a")
    assert proc.returncode == 0, proc.stderr
    assert "stage 4: a trained with seed 777 (a/train.yaml)" in proc.stderr
    assert "progress: epoch 1 of 0..1" in proc.stdout
