"""Distinct values and membership by sorting equal numpy's ``unique`` and ``isin``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.storage.distinct import all_distinct, distinct, distinct_of_sorted, members

VALUES = st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 40), max_size=300)
"""64-bit hashes, with many small ones so that values repeat."""


@settings(max_examples=200, deadline=None)
@given(values=VALUES, of=VALUES)
def test_equal_numpy(values: list[int], of: list[int]) -> None:
    array, others = np.array(values, np.uint64), np.array(of, np.uint64)
    expected = np.unique(array)
    assert np.array_equal(distinct(array), expected)
    assert distinct(array).dtype == np.uint64
    assert np.array_equal(distinct_of_sorted(np.sort(array)), expected)
    assert all_distinct(array) == (len(expected) == len(array))
    assert np.array_equal(members(array, others), np.isin(array, others))


def test_byte_strings() -> None:
    """The ASOF join's points (16-byte strings) sort and match as integers do."""
    points = np.array([b"b" * 16, b"a" * 16, b"b" * 16], dtype="S16")
    assert list(distinct(points)) == [b"a" * 16, b"b" * 16]
    assert list(members(points, points[1:2])) == [False, True, False]
    assert not all_distinct(points)
