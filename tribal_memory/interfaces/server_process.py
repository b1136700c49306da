"""What a long-running process of ours (the HTTP server, the MCP server) sets up first.

A library user's process is left as it is: these settings change the whole
process (its allocator, numpy's thread pools), so only the entry points
that own the process apply them, before any store or model starts threads.
"""

from __future__ import annotations

import ctypes
import sys

from tribal_memory.base.config import Settings

_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h)."""


def prepare_server_process(settings: Settings) -> None:
    """Cap malloc arenas (``malloc_arena_max``) and BLAS threads (``blas_threads``).

    Call before LanceDB, ONNX Runtime or the server start their threads.
    """
    limit_malloc_arenas(settings.malloc_arena_max)
    limit_blas_threads(settings.blas_threads)


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` for threads started from now on.

    glibc gives threads their own arenas (up to 8 per core) and returns little
    of their freed memory to the system, so LanceDB's worker threads building
    indexes during a bulk load leave the server's RSS hundreds of MiB higher
    (at 30k memories: 913 MiB with the default, 685 with 2 arenas). Call before
    LanceDB, ONNX Runtime or the server start their threads.

    Returns:
        True when set; False on a system without glibc or for ``arenas`` 0
        (the default is kept).
    """
    if arenas <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):  # musl or another libc
        return False


def limit_blas_threads(threads: int) -> bool:
    """Run numpy's BLAS (OpenBLAS, MKL...) on at most ``threads`` threads in this process.

    A capture multiplies its batch's vectors with each other (near-duplicates
    within the batch) and with recent rows; on numpy's default threads the
    library's worker then spun for about 100 ms of CPU after each product,
    taking a core from the store's near-duplicate check and write that
    follow. Over HTTP at 10k (``benchmarks/servers_ab.py --questions 0
    --captures 36``, four runs, both orders), a server with one BLAS thread
    captured 256 new facts 0.2-7.3% faster (median of the batches' ratios)
    with 1-5% less server CPU per batch (``servers-ab-blas-10k-1.json`` ..
    ``-4.json``). A search's products are matrix-vector ones (the semantic
    cache's past queries, the learned adapter), after which no spinning was
    measured, and the vector copy's uses einsum. Uses threadpoolctl.

    Returns:
        True when set; False for ``threads`` 0 (the library's default is kept).
    """
    if threads <= 0:
        return False
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    return True
