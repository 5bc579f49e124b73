"""The fenced search of sorted hashes equals numpy's binary search, at every size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC

from ivm.storage import sorted_search
from ivm.storage.sorted_search import equal_ranges, fences_of, search, uses_fences

HASHES = st.lists(st.integers(0, 600), max_size=500)
"""Hash values in a narrow range, so arrays hold runs of equal hashes, wanted ones hit
and miss, and arrays span several 64-entry blocks."""


@settings(max_examples=200, deadline=None)
@given(keys=HASHES, wanted=HASHES)
def test_search_and_ranges_equal_numpy(keys: list[int], wanted: list[int]) -> None:
    with pytest.MonkeyPatch.context() as patch:  # the fenced path at any size (its
        # thresholds are for speed, not meaning)
        patch.setattr(sorted_search, "FENCED_ENTRIES", 0)
        patch.setattr(sorted_search, "FENCED_FROM", 0)
        array = np.sort(np.array(keys, np.uint64))
        asked = np.unique(np.array(wanted, np.uint64))
        fences = fences_of(array)
        assert uses_fences(array, asked)
        expected_low = np.searchsorted(array, asked, side="left")
        np.testing.assert_array_equal(search(array, asked, fences), expected_low)
        low, high = equal_ranges(array, asked, fences)
        np.testing.assert_array_equal(low, expected_low)
        np.testing.assert_array_equal(high, np.searchsorted(array, asked, side="right"))


def test_large_arrays_take_the_fenced_path_and_agree() -> None:
    rng = np.random.default_rng(3)
    array = np.sort(rng.integers(0, 2**63, 1 << 19, dtype=np.int64).astype(np.uint64))
    array = np.sort(np.concatenate([array, array[::7]]))  # runs of two
    asked = np.unique(np.concatenate([
        array[rng.integers(0, len(array), 3000)],
        rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64),
        np.array([0, array[0], array[-1], 2**64 - 1], np.uint64),
    ]))
    assert uses_fences(array, asked)
    low, high = equal_ranges(array, asked, fences_of(array))
    np.testing.assert_array_equal(low, np.searchsorted(array, asked, side="left"))
    np.testing.assert_array_equal(high, np.searchsorted(array, asked, side="right"))


def test_without_fences_it_is_numpy() -> None:
    array = np.array([1, 3, 3, 5], np.uint64)
    asked = np.array([0, 3, 4, 9], np.uint64)
    low, high = equal_ranges(array, asked, None)
    assert low.tolist() == [0, 1, 3, 4] and high.tolist() == [0, 3, 3, 4]


TABLES = [
    "CREATE TABLE a (id INTEGER PRIMARY KEY, k INTEGER, v INTEGER, s VARCHAR)",
    "CREATE TABLE b (k INTEGER, w INTEGER)",
]
VIEWS = {
    "joined": "SELECT a.id, a.s, b.w FROM a JOIN b ON a.k = b.k",
    "grouped": "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM a GROUP BY k",
    "outer": "SELECT b.k, COUNT(a.id) AS n FROM b LEFT JOIN a ON a.k = b.k GROUP BY b.k",
    "distinct": "SELECT DISTINCT k, s FROM a",
}
"""Views whose epochs read arrangements at keys (joins, group versions, match counts,
DISTINCT counts) over tables checked by their row indexes."""


@RANDOM_CDC
@given(data=st.data())
def test_views_with_every_search_fenced(data: st.DataObject) -> None:
    """Every view equals DuckDB's recomputation after every epoch (random CDC: inserts,
    deletes, updates, duplicates, NULLs) with every arrangement and row-index search
    going through fences, as only arrays of 256k entries and lookups of 2k keys do
    otherwise."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sorted_search, "FENCED_ENTRIES", 0)
        patch.setattr(sorted_search, "FENCED_FROM", 0)
        run_workload(TABLES, VIEWS, data, epochs=10,
                     domains={"a.k": (1, 2, 3, None), "b.k": (1, 2, 3, None)})
