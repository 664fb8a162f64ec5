"""One rank of tests/python/test_distributed.py's two-rank run (under `ingot launch`): an
ingot.nn.Module trained through ingot.distributed.DistributedDataParallel on this rank's half of each
batch must match PyTorch (float64, not distributed) trained on the whole batch, step for step."""
import sys

import numpy as np
import torch

import ingot
import ingot.distributed as dist


class Net(ingot.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = ingot.nn.Sequential(ingot.nn.Linear(6, 16), ingot.nn.ReLU(), ingot.nn.Linear(16, 4))
        self.scale = ingot.tensor(np.array([1.5]), requires_grad=True)

    def forward(self, x):
        return self.body(x) * self.scale


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ingot.manual_seed(100 + rank)  # different starting weights: DDP must broadcast rank 0's
    net = Net().to("float64")
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=float(sys.argv[1]) if len(sys.argv) > 1 else 25.0)
    tnet = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).double()
    with torch.no_grad():
        named = dict(net.named_parameters())
        for name, tp in tnet.named_parameters():
            tp.copy_(torch.from_numpy(named["body." + name].numpy()))
    tscale = torch.tensor(named["scale"].numpy(), requires_grad=True)
    opt = ingot.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(list(tnet.parameters()) + [tscale], lr=0.1, momentum=0.9)
    rng = np.random.default_rng(7)  # the same batches on every rank
    per_rank = 4
    for step in range(3):
        x = rng.standard_normal((per_rank * world, 6))
        y = rng.standard_normal((per_rank * world, 4))
        mine = slice(per_rank * rank, per_rank * (rank + 1))
        opt.zero_grad()
        ingot.nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.mse_loss(tnet(torch.from_numpy(x)) * tscale, torch.from_numpy(y)).backward()
        topt.step()
        want = [p.detach().numpy() for p in tnet.parameters()] + [tscale.detach().numpy()]
        got = [dict(net.named_parameters())["body." + n].numpy() for n, _ in tnet.named_parameters()] + [net.scale.numpy()]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"rank {rank}, step {step}")
    print(f"rank {rank} of {world}: {len(ddp.buckets())} bucket(s), parameters match PyTorch on the whole batch")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
