"""Process-group set-up from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), small collectives, and what a
rank says when another one is lost.

Without those variables training runs as one plain process and every helper here is a no-op.

A lost rank (its node died, was killed or cut off): the next collective fails on the ranks still running, at once
when the lost process's sockets were closed (a killed process), else after the process group's ``timeout`` (a node
that stopped answering: gloo's collective timeout, NCCL's watchdog). Each rank also bumps a counter in the
rendezvous store (the ``TCPStore`` at MASTER_ADDR:MASTER_PORT that node 0 hosts) every ``HEARTBEAT_SECONDS`` from a
daemon thread; after a failed collective, the ranks whose counters stand still for ``SILENT_BEATS`` beats are named
as lost (:func:`peer_failure`), so a surviving rank stops with a message naming them instead of a transport error.
"""
import datetime
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from wenet_udps.utils.cli import UserError, one_line

DEFAULT_TIMEOUT = 300.0   # seconds a collective may wait for the slowest rank (run.sh --dist_timeout)
HEARTBEAT_SECONDS = 1.0
SILENT_BEATS = 4          # a rank whose counter stood still this long after a failed collective is lost
_HEARTBEAT_PREFIX = "wenet_udps/heartbeat/"


class RankLost(UserError):
    """Another rank of the distributed run stopped answering (see the module docstring)."""


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


class Heartbeat:
    """This rank's counter in the rendezvous store, bumped every ``HEARTBEAT_SECONDS`` by a daemon thread."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        self.where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=datetime.timedelta(seconds=10))
        self.store = dist.PrefixStore(_HEARTBEAT_PREFIX, store)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="wenet_udps-heartbeat", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while not self.stopped.is_set():
            try:
                self.store.add(str(self.rank), 1)
            except (RuntimeError, OSError):  # the store is gone: silent_ranks says so when a collective fails
                return
            self.stopped.wait(HEARTBEAT_SECONDS)

    def _counts(self) -> List[int]:
        return [self.store.add(str(r), 0) for r in range(self.world_size)]

    def silent_ranks(self) -> Optional[List[int]]:
        """The other ranks whose counter stands still over ``SILENT_BEATS`` beats; None when the store itself is
        unreachable (node 0, which hosts it, is lost)."""
        try:
            before = self._counts()
            time.sleep(SILENT_BEATS * HEARTBEAT_SECONDS)
            after = self._counts()
        except (RuntimeError, OSError):
            return None
        return [r for r in range(self.world_size) if r != self.rank and after[r] == before[r]]

    def stop(self) -> None:
        self.stopped.set()


_heartbeat: Optional[Heartbeat] = None


def init_distributed(backend: str, device: str, timeout: float = DEFAULT_TIMEOUT) -> DistInfo:
    """Join the process group torchrun describes (env RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT).

    ``backend``: nccl (GPU) or gloo (CPU). With ``device == 'cuda'`` each process takes GPU LOCAL_RANK.
    ``timeout``: seconds a collective waits for the other ranks before it fails (gloo; NCCL's watchdog).
    """
    global _heartbeat
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
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout))
        _heartbeat = Heartbeat(info.rank, info.world_size)
        logging.info("rank %d/%d (local rank %d) joined the %s process group (collective timeout %g s)", info.rank,
                     info.world_size, info.local_rank, backend, timeout)
    return info


def peer_failure(info: DistInfo, error: BaseException) -> Optional[RankLost]:
    """After ``error`` (a failed collective, or any error of a distributed run): RankLost naming the ranks that
    are gone, or None when every rank is still there (``error`` is then the cause)."""
    if not info.distributed or _heartbeat is None:
        return None
    lost = _heartbeat.silent_ranks()
    if lost == []:
        return None
    who = (f"the rendezvous store at {_heartbeat.where} (node 0, with rank 0) does not answer" if lost is None else
           f"rank{'s' * (len(lost) > 1)} {', '.join(map(str, lost))} sent no heartbeat for "
           f"{SILENT_BEATS * HEARTBEAT_SECONDS:g} s")
    return RankLost(f"rank {info.rank}: a node is lost: {who} (its node died, was stopped, or its network is down; "
                    f"its own log says more if it still runs). The collective failed with: {one_line(error)[:300]}. "
                    f"Every checkpoint written so far is intact: start the same command on every node again to "
                    f"resume from the newest")


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


def gather_objects(obj: Any) -> List[Any]:
    """Every rank's ``obj`` in rank order (``[obj]`` when not distributed)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    objects: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(objects, obj)
    return objects


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (``obj`` itself when not distributed)."""
    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def cleanup() -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
