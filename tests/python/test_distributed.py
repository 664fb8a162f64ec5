"""ingot.distributed from Python: a one-rank group in this process (the collectives, DDP over an
ingot.nn.Module, no_sync, the errors), and two ranks under `ingot launch` checked against PyTorch on the
whole batch (distributed_worker.py). docs/TRAINING.md, "Data-parallel training"."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ingot
import ingot.distributed as dist


class Net(ingot.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = ingot.nn.Sequential(ingot.nn.Linear(3, 8), ingot.nn.BatchNorm1d(8), ingot.nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)


def test_one_rank_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1)
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.device() == "cpu"
        t = ingot.tensor(np.array([1.0, -2.0, 4.5], np.float32))
        dist.all_reduce(t, op="avg")
        np.testing.assert_array_equal(t.numpy(), [1.0, -2.0, 4.5])
        with pytest.raises(ingot.Error, match="op 'prod'"):
            dist.all_reduce(t, op="prod")
        with pytest.raises(ingot.Error, match="already"):
            dist.init_process_group("gloo", rank=0, world_size=1)
        net = Net()
        names = [n for n, _ in net.named_buffers()]
        assert "body.1.running_mean" in names and "body.1.running_var" in names
        ddp = dist.DistributedDataParallel(net, bucket_cap_mb=1e-6)
        assert ddp.buckets()[0] == ["body.2.bias"] and len(ddp.buckets()) == len(net.parameters())
        x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
        # One rank: DDP's averaged gradients are the plain ones; two backward passes under no_sync
        # and one after it accumulate as three plain ones.
        ingot.op("ReduceSum", ddp(x)).backward()
        once = [p.grad.numpy().copy() for p in net.parameters()]
        net.zero_grad()
        with ddp.no_sync():
            ingot.op("ReduceSum", ddp(x)).backward()
            ingot.op("ReduceSum", ddp(x)).backward()
        ingot.op("ReduceSum", ddp(x)).backward()
        for p, g in zip(net.parameters(), once):
            np.testing.assert_allclose(p.grad.numpy(), 3 * g, rtol=1e-5, atol=1e-6)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized() and dist.get_world_size() == 1


def test_init_names_what_is_missing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ingot.Error, match="set RANK and WORLD_SIZE"):
        dist.init_process_group("gloo")
    with pytest.raises(ingot.Error, match="backend 'mpi'"):
        dist.init_process_group("mpi", rank=0, world_size=1)
    with pytest.raises(ingot.Error, match="no process group"):
        dist.DistributedDataParallel(Net())


@pytest.mark.parametrize("bucket_cap_mb", ["25", "0.000001"])
def test_two_ranks_match_pytorch_on_the_whole_batch(bucket_cap_mb):
    pytest.importorskip("torch")
    cli = os.environ.get("INGOT_CLI")
    if not cli:
        pytest.skip("INGOT_CLI (the ingot program, for `ingot launch`) is not set")
    worker = os.path.join(os.path.dirname(__file__), "distributed_worker.py")
    r = subprocess.run([cli, "launch", "--nproc-per-node", "2", sys.executable, worker, bucket_cap_mb],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("parameters match PyTorch on the whole batch") == 2, r.stdout
