"""Arrangement: lookups and contents equal a plain model of the trace after any inserts."""

from __future__ import annotations

import math
from collections import Counter
from unittest.mock import patch

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.storage.arrangement import MERGE_RATIO, Arrangement, ranges

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])

Row = tuple[int, str]


def key_hash(k: int) -> int:
    """A deliberately weak key hash: keys 0 and 8 collide, as do 1 and 9…"""
    return k % 8


def row_hash(row: Row) -> int:
    return hash(row) & 0x7FFF_FFFF_FFFF_FFFF


def batch(rows: list[tuple[Row, int]]) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    table = pa.table({"k": [r[0] for r, _ in rows], "v": [r[1] for r, _ in rows]},
                     schema=SCHEMA)
    keys = np.array([key_hash(r[0]) for r, _ in rows], np.uint64)
    hashes = np.array([row_hash(r) for r, _ in rows], np.uint64)
    weights = np.array([w for _, w in rows], np.int64)
    return table, keys, hashes, weights


def as_counter(table: pa.Table) -> Counter[Row]:
    found: Counter[Row] = Counter()
    for k, v, w in zip(*(table.column(c).to_pylist() for c in ("k", "v", "__w")), strict=True):
        assert w != 0, "a consolidated read holds no zero weights"
        found[(k, v)] += w
    return found


rows_strategy = st.lists(
    st.tuples(st.tuples(st.integers(0, 20), st.sampled_from(["a", "b", ""])),
              st.integers(-3, 3).filter(bool)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(epochs=st.lists(rows_strategy, max_size=25),
       wanted=st.lists(st.integers(0, 20), max_size=6))
def test_lookups_and_contents_follow_the_model(
    epochs: list[list[tuple[Row, int]]], wanted: list[int]
) -> None:
    follow_the_model(epochs, wanted)


def weak_pair_ids(keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Pair numbers that collide for most unequal pairs (two bits)."""
    return (keys + hashes) % np.uint64(4)


@settings(max_examples=40, deadline=None)
@given(epochs=st.lists(rows_strategy, max_size=25),
       wanted=st.lists(st.integers(0, 20), max_size=6))
def test_colliding_pair_numbers_change_nothing(
    epochs: list[list[tuple[Row, int]]], wanted: list[int]
) -> None:
    """Consolidation and merges check pairs exactly behind their mixed numbers."""
    with patch("ivm.storage.arrangement.pair_ids", weak_pair_ids):
        follow_the_model(epochs, wanted)


def follow_the_model(epochs: list[list[tuple[Row, int]]], wanted: list[int]) -> None:
    """Insert ``epochs`` and compare every read with a plain model after each."""
    arrangement = Arrangement(SCHEMA)
    model: Counter[Row] = Counter()
    for rows in epochs:
        arrangement.insert(*batch(rows))
        for row, weight in rows:
            model[row] += weight
        live = {r: w for r, w in model.items() if w != 0}
        assert as_counter(arrangement.contents()) == live
        positive = {r: w for r, w in live.items() if w > 0}
        assert as_counter(arrangement.contents(positive_only=True)) == positive
        hashes = np.array([key_hash(k) for k in wanted], np.uint64)
        found = as_counter(arrangement.lookup(hashes))
        # Every row of the keys asked for, and only rows whose key hash was asked for.
        assert {r: w for r, w in found.items() if r[0] in wanted} == {
            r: w for r, w in live.items() if r[0] in wanted
        }
        assert all(key_hash(r[0]) in {key_hash(k) for k in wanted} for r in found)
        sizes = [len(b) for b in arrangement.batches]
        assert all(a >= MERGE_RATIO * b for a, b in zip(sizes, sizes[1:], strict=False))
        assert len(sizes) <= math.log2(max(len(arrangement), 1)) + 2
        assert all(np.all(np.diff(b.keys.astype(np.float64)) >= 0)
                   for b in arrangement.batches)


def test_a_batch_of_cancelling_rows_leaves_nothing() -> None:
    arrangement = Arrangement(SCHEMA)
    arrangement.insert(*batch([((1, "a"), 2)]))
    arrangement.insert(*batch([((1, "a"), -2)]))
    assert len(arrangement) == 0
    assert arrangement.lookup(np.array([key_hash(1)], np.uint64)).num_rows == 0


def test_ranges() -> None:
    low, high = np.array([0, 5, 5, 9]), np.array([2, 5, 7, 10])
    assert ranges(low, high).tolist() == [0, 1, 5, 6, 9]
    assert ranges(np.array([3]), np.array([3])).tolist() == []


@settings(max_examples=40, deadline=None)
@given(rows=rows_strategy, wanted=st.lists(st.integers(0, 20), max_size=6))
def test_an_arrangement_of_consolidated_rows_reads_as_one_built_by_inserts(
    rows: list[tuple[Row, int]], wanted: list[int]
) -> None:
    model: Counter[Row] = Counter()
    for row, weight in rows:
        model[row] += weight
    live = [(r, w) for r, w in model.items() if w != 0]
    built = Arrangement.of_consolidated(*batch(live))
    inserted = Arrangement.of(*batch(live))
    assert as_counter(built.contents()) == as_counter(inserted.contents())
    hashes = np.array([key_hash(k) for k in wanted], np.uint64)
    assert as_counter(built.lookup(hashes)) == as_counter(inserted.lookup(hashes))
    assert all(np.all(np.diff(b.keys.astype(np.float64)) >= 0) for b in built.batches)


@settings(max_examples=40, deadline=None)
@given(rows=rows_strategy, wanted=st.lists(st.integers(0, 20), max_size=6))
def test_an_arrangement_of_sorted_unconsolidated_rows_reads_as_one_built_by_inserts(
    rows: list[tuple[Row, int]], wanted: list[int]
) -> None:
    """A trace read as stored (equal rows repeated, weights cancelling) and sorted by
    (key hash, row hash) is consolidated in one pass; unsorted, it is sorted first."""
    table, keys, hashes, weights = batch(rows)
    order = np.lexsort((hashes, keys))
    built = Arrangement.of_sorted(table.take(order), keys[order], hashes[order], weights[order])
    unsorted = Arrangement.of_sorted(table, keys, hashes, weights)
    inserted = Arrangement.of(table, keys, hashes, weights)
    for other in (built, unsorted):
        assert as_counter(other.contents()) == as_counter(inserted.contents())
        assert all(np.all(b.weights != 0) for b in other.batches)
        probes = np.array([key_hash(k) for k in wanted], np.uint64)
        assert as_counter(other.lookup(probes)) == as_counter(inserted.lookup(probes))
