"""Data-parallel training across processes, after torch.distributed and DistributedDataParallel.

    $ ingot launch --nproc-per-node 2 python3 train.py       # RANK, WORLD_SIZE, ... for each process

    import ingot, ingot.distributed as dist
    dist.init_process_group("gloo")                          # "nccl" for CUDA tensors (cuda:LOCAL_RANK)
    model = Net().to(dist.device())
    ddp = dist.DistributedDataParallel(model)                # rank 0's parameters everywhere
    opt = ingot.optim.SGD(model.parameters(), lr=0.1)
    loss = ingot.nn.functional.mse_loss(ddp(x_shard), y_shard)
    loss.backward()                                          # gradients averaged over the ranks
    opt.step()

The C++ API and how it works: docs/TRAINING.md, "Data-parallel training".
"""
import contextlib

from ._ingot import _distributed as _d

init_process_group = _d.init_process_group
destroy_process_group = _d.destroy_process_group
is_initialized = _d.is_initialized
launched = _d.launched
get_rank = _d.get_rank
get_world_size = _d.get_world_size
get_local_rank = _d.get_local_rank
device = _d.device
all_reduce = _d.all_reduce
broadcast = _d.broadcast
barrier = _d.barrier


def _buffers(module):
    if hasattr(module, "named_buffers"):
        return [b for _, b in module.named_buffers()]
    return []


class DistributedDataParallel:
    """Averages the module's gradients over the ranks during each backward (torch's DDP).

    Calling it broadcasts rank 0's buffers (batch norm's statistics) in training mode, then calls the
    module. Create it after moving the module to dist.device() and before the optimizer.
    """

    def __init__(self, module, bucket_cap_mb: float = 25.0, broadcast_buffers: bool = True):
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self._reducer = _d._Reducer(list(module.named_parameters()), lambda: _buffers(module),
                                    bucket_cap_mb=bucket_cap_mb, broadcast_buffers=broadcast_buffers)

    def __call__(self, *args, **kwargs):
        if self.broadcast_buffers and getattr(self.module, "training", True):
            self._reducer.sync_buffers()
        return self.module(*args, **kwargs)

    forward = __call__

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate locally; the next one outside reduces the sum."""
        previous = self._reducer.sync
        self._reducer.sync = False
        try:
            yield
        finally:
            self._reducer.sync = previous

    def buckets(self):
        """Parameter names per gradient bucket, in the order they are reduced."""
        return self._reducer.buckets()


__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "launched", "get_rank", "get_world_size",
           "get_local_rank", "device", "all_reduce", "broadcast", "barrier", "DistributedDataParallel"]
