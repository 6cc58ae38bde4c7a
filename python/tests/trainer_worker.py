"""One process of test_trainer.py: energy.Trainer data-parallel over
torch.distributed (gloo) as its all_gather; rank 0 saves the trained params.
Usage: trainer_worker.py RANK WORLD INIT_FILE DATA.npz RESULT.npz"""

import sys

import numpy as np
import torch
import torch.distributed as dist

import energy
from specs import ATTENTION_TRAIN


def all_gather(values):
    mine = torch.from_numpy(values)
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, mine)
    return torch.cat(parts).numpy()


def main():
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    init_file, data_file, result_file = sys.argv[3:6]
    arrays = np.load(data_file)
    dist.init_process_group("gloo", init_method="file://" + init_file,
                            rank=rank, world_size=world)
    model = energy.compile(ATTENTION_TRAIN, dtype="f64", opt_level=0)
    trainer = energy.Trainer(
        model, {"h": arrays["h"], "y": arrays["y"]}, batch=6, epochs=2, seed=3,
        lr=0.01, fixed={"Wq": arrays["Wq"], "Wk": arrays["Wk"]},
        all_gather=all_gather, rank=rank, size=world)
    trainer.train()
    if rank == 0:
        np.savez(result_file, **trainer.params())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
