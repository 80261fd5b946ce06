import gc
import os

import numpy as np
import pytest

os.environ.setdefault("FUSEGRAD_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".fusegrad-cache"))
# the graph and kernel IR verified after every pass (ir.verify, codegen.kir.checked)
os.environ.setdefault("FUSEGRAD_VERIFY", "1")

from fusegrad.runtime import segments  # noqa: E402

# the tests' small examples run in compiled segments (test_segments checks the default policy)
segments.SEGMENT_MIN_WORK = 0


@pytest.fixture(autouse=True)
def _seed():
    import fusegrad
    fusegrad.manual_seed(0)
    np.random.seed(0)
    yield
    # a failing test must not leak a grad mode, anomaly mode or default dtype into the next
    from fusegrad.runtime.grad_mode import STATE
    STATE.enabled = True
    STATE.anomaly = False
    fusegrad.set_default_dtype(fusegrad.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def pt():
    """PyTorch, the test oracle; tests that ask for it skip without it."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # tiny tensors: worker threads only add contention
    return torch


@pytest.fixture(scope="module")
def frozen_heap():
    """For modules whose checks call gc.collect() often (leaks, shared memory): the objects
    earlier tests left move out of the collector's reach for the module, so each collection
    walks only what the module's own tests make (over the whole suite's heap one took ~2.5 s)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
