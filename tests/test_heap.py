"""Store maintenance gives the C heap's free pages back to the system (glibc)."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from tribal_memory.store.heap import release_free_memory


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_freed_heap_memory_leaves_the_resident_set() -> None:
    name = ctypes.util.find_library("c")
    if name is None or not hasattr(ctypes.CDLL(name), "malloc_trim"):
        pytest.skip("the C library has no malloc_trim (not glibc)")
    libc = ctypes.CDLL(name)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    # 200 MiB in 4 KiB blocks (below the mmap threshold, so on the heap), each
    # written so that it is resident; the last one stays allocated, so the heap
    # cannot shrink from its top when the rest are freed.
    blocks = [libc.malloc(4096) for _ in range(51_200)]
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    for block in blocks[:-1]:
        libc.free(block)
    held = _rss_mib()
    assert release_free_memory()
    assert _rss_mib() < held - 100
    libc.free(blocks[-1])
