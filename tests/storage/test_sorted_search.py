"""The fenced search of sorted hashes equals numpy's binary search, at every size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.storage import sorted_search
from ivm.storage.sorted_search import equal_ranges, fences_of, search, uses_fences

HASHES = st.lists(st.integers(0, 40), max_size=400)
"""Small hash values, so arrays hold runs of equal hashes and wanted ones hit and miss."""


@pytest.fixture
def always_fenced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fenced path at any size (its thresholds are for speed, not meaning)."""
    monkeypatch.setattr(sorted_search, "FENCED_ENTRIES", 0)
    monkeypatch.setattr(sorted_search, "FENCED_FROM", 0)


@settings(max_examples=200, deadline=None)
@given(keys=HASHES, wanted=HASHES)
def test_search_and_ranges_equal_numpy(keys: list[int], wanted: list[int]) -> None:
    with pytest.MonkeyPatch.context() as patch:  # the fenced path at any size
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


def test_without_fences_it_is_numpy(always_fenced: None) -> None:
    array = np.array([1, 3, 3, 5], np.uint64)
    asked = np.array([0, 3, 4, 9], np.uint64)
    low, high = equal_ranges(array, asked, None)
    assert low.tolist() == [0, 1, 3, 4] and high.tolist() == [0, 3, 3, 4]
