"""Differential fuzzing of fusegrad: random programs, checked against eager, the compiler's
backends, PyTorch, finite differences and the forward/reverse Jacobians."""
