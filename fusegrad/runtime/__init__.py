"""Runtime: tensors, eager dispatch, the autograd engine, executables and caches."""
