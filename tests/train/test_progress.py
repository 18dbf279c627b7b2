"""wenet_udps.train.progress: the line a training logs per epoch for the terminal (run.sh's stage 4 prints it), and
what a CPU training's log says about the Triton kernel (issue 57: nothing)."""
from wenet_udps.train.progress import duration_text, losses_text, progress_line
from tests.train.train_helpers import make_experiment, run_train


def test_duration_text():
    assert [duration_text(s) for s in (0, 40.4, 65, 725, 3600, 3930)] == [
        "0 s", "40 s", "1 min 5 s", "12 min 5 s", "1 h 0 min", "1 h 6 min"]


def test_progress_line_estimates_the_time_left_from_the_epochs_trained():
    line = progress_line(3, 24, {"loss": 45.123, "loss_ctc": 60.1, "loss_att": 40.3},
                         {"loss": 44.0, "loss_ctc": 50.0, "loss_att": None}, [30.0, 32.0, 34.0])
    # 20 epochs left (4..23) at 32 s each
    assert line == ("progress: epoch 3 of 0..23 done; train loss 45.12 (ctc 60.10, att 40.30); cv loss 44.00 "
                    "(ctc 50.00); 34 s this epoch, about 10 min 40 s left")
    assert progress_line(23, 24, {"loss": 1.0}, {}, [5.0]).endswith("5 s this epoch, last epoch")
    assert losses_text({}) == "loss -"


def test_a_cpu_training_logs_progress_and_no_triton_line(tmp_path, fsdd_dir):
    """Issue 57: a CPU-only train.log ended with "UDPS Triton kernel self-check: no UDPS Triton call in this
    process", and no line said how far training was."""
    exp = make_experiment(tmp_path, fsdd_dir, max_epoch=2)
    log = run_train(exp, tmp_path / "model").stderr
    progress = [ln for ln in log.splitlines() if "progress: epoch" in ln]
    assert len(progress) == 2, log[-2000:]
    assert "progress: epoch 0 of 0..1 done; train loss " in progress[0] and "; cv loss " in progress[0]
    assert progress[0].endswith(" left") and progress[1].endswith("last epoch")
    assert "training done; final.pt -> epoch_1.pt" in log
    assert "triton" not in log.lower(), [ln for ln in log.splitlines() if "riton" in ln]
