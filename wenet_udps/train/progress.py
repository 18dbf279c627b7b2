"""The lines a training logs for a person watching: one per epoch (the epoch, the losses and an estimate of the time
left), and a warning worth seeing before the first epoch ends.

:mod:`wenet_udps.bin.train` logs them (``progress: epoch 3 of 0..23 done; ...``, ``progress: warning: ...``).
run.sh's stage 4 runs its CPU trainings side by side, each writing to its ``train.log``; it prints every new
progress line of each (tools/run_train.sh, ``print_progress``) with the model's name, so the terminal shows how far
a long stage is, and what may make it pointless.
"""
from typing import Dict, Optional, Sequence

PREFIX = "progress:"   # what tools/run_train.sh looks for in a train.log


def duration_text(seconds: float) -> str:
    """``"1 h 5 min"``, ``"12 min 5 s"``, ``"40 s"``: rounded to the second (to the minute above an hour)."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {round(rest / 60)} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def losses_text(losses: Dict[str, Optional[float]]) -> str:
    """``"loss 45.12 (ctc 60.10, att 40.30)"`` from ``{"loss": .., "loss_ctc": .., "loss_att": ..}``; parts that
    are missing or None (a CTC-only model has no attention loss) are left out."""
    parts = [f"{key.removeprefix('loss_')} {value:.2f}" for key, value in losses.items()
             if key != "loss" and value is not None]
    total = losses.get("loss")
    head = f"loss {total:.2f}" if total is not None else "loss -"
    return f"{head} ({', '.join(parts)})" if parts else head


def progress_warning(text: str) -> str:
    """``text`` as a progress line: run.sh shows it on the terminal beside the epoch lines."""
    return f"{PREFIX} warning: {text}"


def progress_line(epoch: int, max_epoch: int, train_losses: Dict[str, Optional[float]],
                  cv_losses: Dict[str, Optional[float]], epoch_seconds: Sequence[float]) -> str:
    """The line for epoch ``epoch`` (numbered from 0, of ``max_epoch``) just done.

    ``epoch_seconds``: the wall time of each epoch this process trained, this one last; the time left is their mean
    times the epochs left (a resumed run estimates from its own epochs only: the interrupted run's may have had
    another machine or load).
    """
    left = max_epoch - 1 - epoch
    per_epoch = sum(epoch_seconds) / len(epoch_seconds)
    eta = f"about {duration_text(per_epoch * left)} left" if left else "last epoch"
    return (f"{PREFIX} epoch {epoch} of 0..{max_epoch - 1} done; train {losses_text(train_losses)}; "
            f"cv {losses_text(cv_losses)}; {duration_text(epoch_seconds[-1])} this epoch, {eta}")
