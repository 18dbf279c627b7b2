"""Process-group set-up from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) and small collectives.

Without those variables training runs as one plain process and every helper here is a no-op.
"""
import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(backend: str, device: str) -> DistInfo:
    """Join the process group torchrun describes (env RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT).

    ``backend``: nccl (GPU) or gloo (CPU). With ``device == 'cuda'`` each process takes GPU LOCAL_RANK.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    info = DistInfo(rank=int(os.environ.get("RANK", "0")), world_size=world_size,
                    local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda but no CUDA device is available")
        torch.cuda.set_device(info.local_rank)
    if info.distributed:
        if backend == "nccl" and device != "cuda":
            raise ValueError("--dist_backend nccl needs --device cuda; use gloo on CPU")
        dist.init_process_group(backend=backend)
        logging.info("rank %d/%d (local rank %d) joined the %s process group", info.rank, info.world_size,
                     info.local_rank, backend)
    return info


def needs_unused_params(model: torch.nn.Module) -> bool:
    """DDP must look for unused parameters when a branch of the ASR model is off (CTC or decoder alone,
    bitransformer's right decoder with reverse_weight 0)."""
    if model.ctc_weight in (0.0, 1.0):
        return True
    return hasattr(model.decoder, "right_decoder") and model.reverse_weight == 0.0


def all_reduce_max(value: float, device: torch.device) -> float:
    """max over ranks (the value itself when not distributed)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = torch.tensor([value], dtype=torch.float64 if device.type != "cuda" else torch.float32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def all_reduce_min(value: float, device: torch.device) -> float:
    """min over ranks."""
    return -all_reduce_max(-value, device)


def all_reduce_sum(values, device: torch.device):
    """Element-wise sum over ranks of a list of numbers (returned as floats)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64 if device.type != "cuda" else torch.float32,
                     device=device)
    dist.all_reduce(t)
    return t.tolist()


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
