"""fusegrad's benchmark suite: workloads W1-W6 of ../shared/BENCHMARKS.md, each run in
fusegrad (eager and compiled) and in the systems a user would pick instead (PyTorch eager,
torch.compile, JAX jit, NumPy by hand), side by side in one process.

Run ``python -m benchmarks [W1 ...] [--quick]``; see ``benchmarks/__main__.py``."""
