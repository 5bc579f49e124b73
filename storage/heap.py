"""The process's heap: what ivm asks of the C library's allocator so that memory the
engine frees goes back to the system instead of staying resident as holes.

Python's objects, numpy's arrays and most of what an epoch allocates outside DuckDB and
Arrow come from glibc's ``malloc``. glibc serves a request above its mmap threshold with
a mapping of its own, unmapped when freed; below it, from the heap, whose free holes stay
resident. The threshold starts at 128 KiB, but each time a mapped block is freed glibc
raises it to that block's size (up to 32 MiB), so after the first epoch an epoch's
arrays of a few megabytes come from the heap, and their holes accumulate between
longer-lived objects: in the 1,000-epoch soak (``benchmarks/bench_soak.py``) glibc's
free bytes grew from 35 to 350 MB and the resident set by 1.22× after warm-up.

``keep_large_blocks_mapped`` sets the threshold once per process (``mallopt``), which
also stops glibc from raising it: blocks of 128 KiB and more are always mapped and given
back when freed. An operator's or the user's own choice is kept: nothing is set when the
environment already sets the threshold (``MALLOC_MMAP_THRESHOLD_`` or
``glibc.malloc.mmap_threshold`` in ``GLIBC_TUNABLES``). Where the C library is not glibc
(musl, macOS) both calls do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import Any

import pyarrow as pa

MMAP_THRESHOLD_BYTES = 128 * 1024
"""Blocks at least this large are mapped by glibc and unmapped when freed (its initial
threshold, kept from rising)."""

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's ``malloc.h``)."""


@functools.cache
def _libc() -> Any:
    """The C library, or None where it cannot be found."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def threshold_set_by_environment() -> bool:
    """Whether the environment already chose glibc's mmap threshold."""
    return "MALLOC_MMAP_THRESHOLD_" in os.environ or (
        "glibc.malloc.mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""))


@functools.cache
def keep_large_blocks_mapped() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD_BYTES`` (once per process; a
    session's open and a Spark task's call it). True when it was set."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None or threshold_set_by_environment():
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def return_freed_pages() -> None:
    """Ask Arrow's memory pool and glibc to give back to the system the pages they hold
    free. Arrow's pool (mimalloc or jemalloc) keeps freed pages for reuse: ≈47 MB after
    40 epochs of the soak; glibc gives back the whole free pages inside its heap only when
    asked (``malloc_trim(0)``)."""
    pa.default_memory_pool().release_unused()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "keep_large_blocks_mapped",
    "return_freed_pages",
    "threshold_set_by_environment",
]
