"""Data-parallel training of an MLP on synthetic data, one process per rank:

    mpiexec -n 2 python examples/ddp_train.py [--steps 50] [--compile]

Every rank draws its own batches (a different seed per rank), DistributedDataParallel
averages the gradients, so all ranks hold the same parameters after each step; each rank
prints its loss and, at the end, a checksum of its parameters (equal on every rank)."""
from __future__ import annotations

import argparse

import numpy as np

import fusegrad as torch
import fusegrad.distributed as dist
from fusegrad import nn
from fusegrad.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    ap.add_argument("--compile", action="store_true", help="compile the model (split at bucket boundaries)")
    args = ap.parse_args()

    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # different on purpose: DDP starts every rank from rank 0's parameters
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    ddp = DDP(torch.compile(model) if args.compile else model, bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    w_true = np.random.default_rng(0).normal(size=(32, 1)).astype(np.float32)
    rng = np.random.default_rng(1000 + rank)  # this rank's share of the data
    for step in range(args.steps):
        x = rng.normal(size=(args.batch, 32)).astype(np.float32)
        y = np.tanh(x @ w_true) + 0.05 * rng.normal(size=(args.batch, 1)).astype(np.float32)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.5f}", flush=True)
    checksum = sum(float(np.asarray(p.detach().numpy(), dtype=np.float64).sum()) for p in model.parameters())
    print(f"rank {rank} final parameter checksum {checksum:.10e} (world size {world})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
