import socket

import torch
import torch.multiprocessing as mp

from wenet_udps.config import finalize_config
from wenet_udps.train.distributed import DistInfo
from tests.train.ddp_helpers import ddp_worker, global_batch, half, run
from tests.train.train_helpers import tiny_config, write_units


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_ddp_matches_single_process_on_global_batch(tmp_path):
    units = tmp_path / "units.txt"
    write_units(units)
    # dropout 0 and a Transformer encoder (no BatchNorm), so the split batch sees the same computation.
    config = finalize_config({**tiny_config(units, dropout=0.0), "grad_clip": 1000.0})
    mp.spawn(ddp_worker, args=(2, free_port(), config, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    grads, weights, stats = run(config, [global_batch(config["output_dim"])], DistInfo())
    assert stats.steps == 1
    for r in ranks:
        assert r["batches"] == 1 and r["steps"] == 1  # rank 0's extra batch was not used
        assert grads.keys() == r["grads"].keys()
        for name, g in grads.items():
            torch.testing.assert_close(r["grads"][name], g, rtol=1e-4, atol=1e-6, msg=name)
        for name, w in weights.items():
            torch.testing.assert_close(r["weights"][name], w, rtol=1e-4, atol=1e-6, msg=name)
    # A rank's own half-batch gradient differs from the global one, so the match above needs the all-reduce.
    local, _, _ = run(config, [half(global_batch(config["output_dim"]), 0)], DistInfo())
    torch.set_num_threads(threads)
    assert any(not torch.allclose(local[n], g, rtol=1e-3, atol=1e-5) for n, g in grads.items())
