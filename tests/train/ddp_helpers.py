"""Worker for the 2-process gloo DDP test (importable by spawned children)."""
import os

import torch


def global_batch(vocab: int):
    """4 equal-length utterances (no padding, so per-rank halves see exactly what the full batch sees)."""
    g = torch.Generator().manual_seed(3)
    return {"keys": ["a", "b", "c", "d"], "feats": torch.randn(4, 48, 20, generator=g),
            "feats_lengths": torch.tensor([48, 48, 48, 48]),
            "target": torch.randint(2, vocab - 1, (4, 3), generator=g), "target_lengths": torch.tensor([3, 3, 3, 3])}


def half(batch, rank: int):
    idx = slice(2 * rank, 2 * rank + 2)
    return {k: v[idx] for k, v in batch.items()}


def run(config, batches, dist_info, model_wrapper=None):
    """Gradients of the first batch, then weights after Executor.train_epoch over ``batches``."""
    from wenet_udps.model_builder import build_model
    from wenet_udps.train.executor import Executor
    from wenet_udps.train.scheduler import build_optimizer, build_scheduler
    torch.manual_seed(0)
    model = build_model(config)
    wrapped = model_wrapper(model) if model_wrapper else model
    b = batches[0]
    wrapped(b["feats"], b["feats_lengths"], b["target"], b["target_lengths"])["loss"].backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    opt = build_optimizer(config, model.parameters())
    ex = Executor(model=wrapped, optimizer=opt, scheduler=build_scheduler(config, opt), config=config,
                  device=torch.device("cpu"), dist_info=dist_info)
    stats = ex.train_epoch(batches, epoch=0)
    return grads, {k: v.clone() for k, v in model.state_dict().items()}, stats


def ddp_worker(rank: int, world_size: int, port: int, config, out_dir: str) -> None:
    from torch.nn.parallel import DistributedDataParallel
    from wenet_udps.train.distributed import cleanup, init_distributed
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank)})
    torch.set_num_threads(1)
    info = init_distributed("gloo", "cpu")
    batch = global_batch(config["output_dim"])
    mine = half(batch, rank)
    # Rank 0 has one batch more: the epoch must end for both at rank 1's count instead of hanging.
    batches = [mine, mine] if rank == 0 else [mine]
    grads, weights, stats = run(config, batches, info, lambda m: DistributedDataParallel(m))
    torch.save({"grads": grads, "weights": weights, "batches": stats.batches, "steps": stats.steps},
               os.path.join(out_dir, f"rank{rank}.pt"))
    cleanup()
