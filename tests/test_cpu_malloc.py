"""The cpu backend keeps freed large blocks in the heap (codegen/cpu_malloc.py): an
intermediate of megabytes allocated again on the next call reuses pages already mapped
instead of page-faulting fresh zeroed ones."""
from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen.cpu_malloc import keep_freed_blocks

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="mallopt thresholds are glibc's")


def _faults_of_a_fresh_block(n: int) -> int:
    """Minor page faults while a block of ``n`` float32 is allocated, written and freed."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.empty(n, np.float32)
    a.fill(1.0)
    del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@glibc
def test_a_compile_keeps_freed_blocks_for_the_next_call():
    f = fg.compile(lambda x: (x * 2).sum())
    f(fg.ones(4))  # the cpu backend's first compile sets the thresholds
    n = 4 * 2**20  # 16 MiB: above glibc's default mmap threshold, below the one set
    _faults_of_a_fresh_block(n)
    # mmapped afresh, the block faults ~500 times (2 MiB huge pages where granted, else 4096)
    assert _faults_of_a_fresh_block(n) < 32
    assert keep_freed_blocks()
