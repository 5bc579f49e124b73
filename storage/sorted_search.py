"""Searching a sorted array of 64-bit hashes for a batch of wanted hashes, vectorized.

An arrangement's batch (``ivm.storage.arrangement``) and a row index's level
(``ivm.execution.row_index``) are sorted arrays of hashes, searched with all of an
epoch's hashes at once. ``numpy.searchsorted`` does one binary search per wanted hash;
over millions of entries each search is bound by memory latency (the array is far
larger than the caches), and past a few thousand wanted hashes its time jumps (6M
entries: 4k hashes 2.5 ms, 8k 4.9 ms, measured on the 2-core machine).

*Fences* (every ``STEP``-th entry, the last of each block: 1/64 of the array, small
enough to stay in cache) cut each search in two: a search of the fences finds the one
block that can hold the hash, then a branch-free binary search within the block,
vectorized over every wanted hash at once, touches a few cache lines near each other
(6M entries: 4k hashes 0.76 ms, 8k 1.3 ms). Below ``FENCED_FROM`` wanted hashes, or
over a small array, the plain search is faster and is used.
"""

from __future__ import annotations

import numpy as np

STEP = 64
"""Entries per block between two fences."""
_STEP_BITS = 6
"""log₂ ``STEP``: the binary search within a block takes this many halvings, plus one."""
FENCED_FROM = 2048
"""Wanted hashes from which the fenced search pays (measured at 1.5M and 6M entries)."""
FENCED_ENTRIES = 1 << 18
"""Entries from which the fenced search pays."""


def fences_of(keys: np.ndarray) -> np.ndarray:
    """The last entry of each full block of ``keys`` (a sorted array), for ``search``."""
    return keys[STEP - 1 :: STEP].copy()


def uses_fences(keys: np.ndarray, wanted: np.ndarray) -> bool:
    """Whether ``search`` of ``wanted`` in ``keys`` goes through fences."""
    return len(keys) >= FENCED_ENTRIES and len(wanted) >= FENCED_FROM


def search(keys: np.ndarray, wanted: np.ndarray, fences: np.ndarray | None = None) -> np.ndarray:
    """For each of ``wanted``, the position of the first entry of ``keys`` (sorted) not
    below it: ``numpy.searchsorted(keys, wanted, side="left")``, through ``fences``
    (``fences_of(keys)``) when given (callers give them where ``uses_fences``)."""
    size = len(keys)
    if fences is None or size == 0:
        return np.searchsorted(keys, wanted, side="left")
    low = np.searchsorted(fences, wanted, side="left") * STEP  # the block that can hold it
    high = np.minimum(low + STEP, size)
    for _ in range(_STEP_BITS + 1):
        middle = (low + high) >> 1
        right = keys[np.minimum(middle, size - 1)] < wanted
        right &= low < high
        low = np.where(right, middle + 1, low)
        high = np.where(right, high, np.maximum(middle, low))
    return low


def equal_ranges(
    keys: np.ndarray, wanted: np.ndarray, fences: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``wanted`` (sorted), the range ``[low, high)`` of the entries of
    ``keys`` (sorted) equal to it (empty where none is). One search per wanted hash;
    the end of a range is searched for only where the range holds two entries or more
    (most hashes miss most batches, and most keys of a trace have one row)."""
    low = search(keys, wanted, fences)
    high = low.copy()
    size = len(keys)
    hits = np.flatnonzero(low < size)
    hits = hits[keys[low[hits]] == wanted[hits]]
    high[hits] += 1
    longer = hits[high[hits] < size]
    longer = longer[keys[high[longer]] == wanted[longer]]
    if len(longer):
        high[longer] = np.searchsorted(keys, wanted[longer], side="right")
    return low, high
