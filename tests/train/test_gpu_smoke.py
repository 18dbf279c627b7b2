"""CUDA smoke test (marker ``gpu``, skipped without CUDA): a few training steps of every attention variant through
the real Executor (AMP bf16, and fp16 with GradScaler; pinned batches copied non_blocking), then one decode."""
import math

import pytest
import torch

from wenet_udps.kernels import dispatch
from wenet_udps.model_builder import build_model
from wenet_udps.config import finalize_config
from wenet_udps.train.distributed import DistInfo
from wenet_udps.train.executor import Executor
from wenet_udps.train.scheduler import build_optimizer, build_scheduler
from tests.train.test_executor_skip import synthetic_batches
from tests.train.train_helpers import tiny_config, write_units

pytestmark = pytest.mark.gpu

VARIANTS = [(encoder, udps) for encoder in ("transformer", "conformer") for udps in (False, True)]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("encoder,udps", VARIANTS, ids=[f"{e}-{'udps' if u else 'scaled_dot'}" for e, u in VARIANTS])
def test_train_steps_and_decode_on_cuda(tmp_path, monkeypatch, encoder, udps, dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    units = tmp_path / "units.txt"
    write_units(units)
    config = finalize_config(tiny_config(units, att_udps=udps, encoder=encoder))
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = build_model(config).to(device)
    opt = build_optimizer(config, model.parameters())
    executor = Executor(model=model, optimizer=opt, scheduler=build_scheduler(config, opt), config=config,
                        device=device, dist_info=DistInfo(), dtype=dtype)
    kernels = []
    choose = dispatch.choose_udps_kernel
    monkeypatch.setattr(dispatch, "choose_udps_kernel", lambda *a: kernels.append(choose(*a)) or kernels[-1])
    batches = [{k: v.pin_memory() if torch.is_tensor(v) else v for k, v in b.items()}
               for b in synthetic_batches(4, config["output_dim"])]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    stats = executor.train_epoch(batches, epoch=0)
    assert stats.batches == 4 and stats.skipped_batches == 0
    assert stats.steps + stats.overflow_steps == 4 and stats.steps >= 1
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(math.isfinite(v) for v in stats.losses.values() if v is not None)
    # Every UDPS site (encoder, decoder self and source attention) ran the Triton kernel; scaled-dot none.
    assert (set(kernels) == {"triton"}) if udps else not kernels
    model.eval()
    feats = batches[0]["feats"].to(device)
    with torch.no_grad():
        results = model.decode(["ctc_greedy_search", "attention_rescoring"], feats,
                               batches[0]["feats_lengths"].to(device), beam_size=3, ctc_weight=0.5)
    assert set(results) == {"ctc_greedy_search", "attention_rescoring"}
    assert all(len(r) == feats.size(0) for r in results.values())
