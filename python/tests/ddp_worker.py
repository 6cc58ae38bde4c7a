"""One process of test_ddp.py: an EnergyModule wrapped in
DistributedDataParallel (gloo), one SGD step on this rank's contiguous
shard of the batch; rank 0 saves the updated params.
Usage: ddp_worker.py RANK WORLD INIT_FILE DATA.npz RESULT.npy"""

import sys

import numpy as np
import torch
import torch.distributed as dist

from energy.torch import EnergyModule

BATCHED_FIT = """
model batched_fit {
  dim B, N, D;
  input x : [B, N, D];
  param W : [D, D];
  state mu : [B, D] = zeros;
  energy e = sum(b: B, i: N) 0.5 * sqnorm(mu[b] - W @ x[b, i]);
  dynamics { mu: gd(lr = 0.1); steps 3; }
}
"""


def make_layer(data):
    """The layer with the initial params of `data`."""
    layer = EnergyModule(BATCHED_FIT, dtype="f64", opt_level=0, D=3)
    with torch.no_grad():
        layer.W.copy_(torch.from_numpy(data["W"]))
    return layer


def step(model, optimizer, x, target):
    """One SGD step on the mean squared error of the final states."""
    loss = ((model(x=x) - target) ** 2).sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    init_file, data_file, result_file = sys.argv[3:6]
    data = np.load(data_file)
    dist.init_process_group("gloo", init_method="file://" + init_file,
                            rank=rank, world_size=world)
    layer = make_layer(data)
    model = torch.nn.parallel.DistributedDataParallel(layer)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    shard = len(data["x"]) // world
    rows = slice(rank * shard, (rank + 1) * shard)
    step(model, optimizer, torch.from_numpy(data["x"][rows]),
         torch.from_numpy(data["target"][rows]))
    if rank == 0:
        np.save(result_file, layer.W.detach().numpy())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
