import os

import pytest
import torch

from wenet_udps.config import load_config
from wenet_udps.dataset.processor import most_batches
from wenet_udps.train import checkpoint as ckpt
from wenet_udps.train.checkpoint_files import latest_checkpoint, list_checkpoints
from wenet_udps.train.scheduler import build_optimizer, build_scheduler, warmup_shortfall


def test_warmuplr_follows_wenet_formula():
    p = torch.nn.Parameter(torch.zeros(1))
    cfg = {"optim": "adam", "optim_conf": {"lr": 0.002}, "scheduler": "warmuplr",
           "scheduler_conf": {"warmup_steps": 25}}
    opt = build_optimizer(cfg, [p])
    sched = build_scheduler(cfg, opt)
    for step in range(1, 80):
        expected = 0.002 * 25 ** 0.5 * min(step ** -0.5, step * 25 ** -1.5)
        assert opt.param_groups[0]["lr"] == pytest.approx(expected)
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match="warmup_step"):
        build_scheduler({"scheduler": "warmuplr", "scheduler_conf": {"warmup_step": 3}}, opt)
    with pytest.raises(ValueError, match="adamw"):
        build_optimizer({"optim": "sgd"}, [p])


def test_readers_ignore_temp_and_incomplete_checkpoints(tmp_path):
    state = {"model": {"w": torch.ones(2)}, "epoch": 0}
    ckpt.save_checkpoint(str(tmp_path), "epoch_0", state, {"epoch": 0, "step": 5, "cv_loss": 1.0})
    ckpt.save_checkpoint(str(tmp_path), "step_7", state, {"epoch": 1, "step": 7})
    # A save killed mid-write leaves a temp file (and a .pt without its .yaml when killed between the two).
    (tmp_path / ".step_9.pt.tmp.1234").write_bytes(b"partial")
    (tmp_path / "step_9.pt").write_bytes(b"partial too")
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "step_7.pt")
    assert [os.path.basename(p) for p, _ in list_checkpoints(str(tmp_path))] == ["epoch_0.pt", "step_7.pt"]
    with pytest.raises(ValueError, match="temporary"):
        ckpt.load_checkpoint(str(tmp_path / ".step_9.pt.tmp.1234"))
    loaded = ckpt.load_checkpoint(str(tmp_path / "step_7.pt"))
    assert torch.equal(loaded["model"]["w"], torch.ones(2))
    torch.save({"w": torch.zeros(2)}, tmp_path / "bare.pt")
    assert torch.equal(ckpt.load_checkpoint(str(tmp_path / "bare.pt"))["model"]["w"], torch.zeros(2))


def test_final_link_points_at_last(tmp_path):
    src = ckpt.save_checkpoint(str(tmp_path), "epoch_3", {"model": {"w": torch.ones(1)}}, {"epoch": 3})
    final = ckpt.link_final(str(tmp_path), src)
    assert torch.equal(ckpt.load_checkpoint(final)["model"]["w"], torch.ones(1))


def test_resume_applies_a_changed_lr_and_warmup_instead_of_ignoring_them():
    """Issue 29: optim_conf.lr changed for a resume was recorded in train.yaml but the checkpoint's lr was used."""
    from wenet_udps.train.scheduler import build_optimizer, build_scheduler, restore_with_config
    config = {"optim": "adam", "optim_conf": {"lr": 2e-3, "weight_decay": 0.0}, "scheduler": "warmuplr",
              "scheduler_conf": {"warmup_steps": 10}}
    model = torch.nn.Linear(2, 2)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt = build_optimizer(config, model.parameters())
    sched = build_scheduler(config, opt)
    for _ in range(20):
        opt.step()
        sched.step()
    state = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}
    lr_then = opt.param_groups[0]["lr"]
    same_opt = build_optimizer(config, model.parameters())
    same_sched = build_scheduler(config, same_opt)
    assert restore_with_config(same_opt, same_sched, state) == {}
    assert same_opt.param_groups[0]["lr"] == lr_then
    changed = {**config, "optim_conf": {"lr": 5e-4, "weight_decay": 0.01}, "scheduler_conf": {"warmup_steps": 4}}
    new_opt = build_optimizer(changed, model.parameters())
    new_sched = build_scheduler(changed, new_opt)
    assert restore_with_config(new_opt, new_sched, state) == {
        "optim_conf.weight_decay": (0.0, 0.01), "optim_conf.lr": (2e-3, 5e-4), "scheduler_conf.warmup_steps": (10, 4)}
    expected = 5e-4 * 4 ** 0.5 * 21 ** -0.5  # step 21 of the applied schedule
    assert new_opt.param_groups[0]["lr"] == pytest.approx(expected)
    new_opt.step()
    new_sched.step()
    assert new_opt.param_groups[0]["lr"] == pytest.approx(5e-4 * 4 ** 0.5 * 22 ** -0.5)
    assert new_opt.state_dict()["state"][0]["step"] == 21  # the moments and step count are the checkpoint's


def test_a_warmup_longer_than_the_run_is_named_before_it_trains():
    """Issue 68: a 3-epoch trial of the main job's conf (warm-up 2,000 steps, 200 batches an epoch) decoded to
    nothing, and nothing said so before it trained."""
    conf = load_config("conf/tiny_zh/train_conformer.yaml")
    batches = most_batches(800, conf["dataset_conf"]["batch_conf"], num_workers=2)   # the main job's 800 utterances
    assert batches == 200 and warmup_shortfall(conf, batches) is None   # 24 epochs: 4,800 steps
    short = warmup_shortfall({**conf, "max_epoch": 3}, batches)
    assert short.startswith("scheduler_conf.warmup_steps 2000 is more than the 600 optimizer steps this run takes at "
                            "most (max_epoch 3 x 200 batches / accum_grad 1)"), short
    assert "ends at 30% of optim_conf.lr" in short and "scheduler_conf.warmup_steps=150" in short
    assert warmup_shortfall({**conf, "max_epoch": 10, "accum_grad": 4}, batches) is not None   # 500 steps
    assert warmup_shortfall({**conf, "max_epoch": 3, "scheduler": "constantlr", "scheduler_conf": {}}, 1) is None
    # without scheduler_conf.warmup_steps, WarmupLR's own default (WeNet's 25,000) is what the run would get
    assert "warmup_steps 25000 " in warmup_shortfall({**conf, "scheduler_conf": {}}, batches)


def test_most_batches_per_worker_share():
    static = {"batch_type": "static", "batch_size": 4}
    assert most_batches(10, static, num_workers=0) == 3            # 4 + 4 + 2
    assert most_batches(10, static, num_workers=2) == 4            # 5 and 5 utterances: 4 + 1 each
    assert most_batches(3, static, num_workers=4) == 3             # a worker with none makes no batch
    bucket = {"batch_type": "bucket", "bucket_boundaries": [50], "bucket_batch_sizes": [2, 4]}
    assert most_batches(10, bucket, num_workers=1) == 6            # at most 5 of 2, and one short bucket left
    assert most_batches(10, {"batch_type": "dynamic", "max_frames_in_batch": 100}, num_workers=2) == 10
