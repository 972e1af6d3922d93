"""A whole world of ranks simulated in this one process: PyTorch's "fake" c10d backend as rank 0 of W.

Every collective returns at once without moving data (torch.testing._internal.distributed.fake_pg), so
DeviceMesh, DTensor, tensor parallel and FSDP2 build and run exactly as they would on rank 0 of a W-rank job;
under FakeTensorMode no tensor has memory behind it. Ranks of a TP x FSDP layout are symmetric, and rank 0 holds
the largest FSDP shard when a dimension does not split evenly, so rank 0's numbers are the per-core worst case.
"""

from __future__ import annotations

import contextlib
import os

import torch.distributed as dist


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0):
    """A default process group of WORLD_SIZE ranks, this process being RANK, for cpu and neuron tensors."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    if dist.is_initialized():
        raise RuntimeError("torch.distributed is already initialized in this process: a plan simulates its own "
                           "world; call it from a process without a process group")
    saved = {k: os.environ.get(k) for k in ("LOCAL_RANK", "RANK", "WORLD_SIZE")}
    # Transformers binds the rank's device from LOCAL_RANK (rank 0 of a single host: neuron:0)
    os.environ.update(LOCAL_RANK="0", RANK=str(rank), WORLD_SIZE=str(world_size))
    dist.init_process_group("cpu:fake,neuron:fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
