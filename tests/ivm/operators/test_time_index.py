"""``TimeIndex`` against brute force over a dict of live points, under random changes."""

from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.operators import time_index
from ivm.operators.time_index import (
    TOP,
    TimeIndex,
    nearest_in,
    points_of,
    split_points,
    time_code_sql,
    time_value_sql,
)

KEYS = st.sampled_from([0, 1, 2**63, 2**64 - 1])  # hashes: sign bit and extremes included
TIMES = st.sampled_from([-TOP, -(2**40), -3, -1, 0, 1, 2, 5, 2**40, TOP])
CHANGES = st.lists(st.lists(st.tuples(KEYS, TIMES, st.integers(-2, 3)), max_size=8),
                   min_size=1, max_size=6)


def _arrays(points: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([k for k, _ in points], dtype=np.uint64),
            np.array([t for _, t in points], dtype=np.int64))


def _nearest(live: Counter, key: int, time: int, before: bool, strict: bool) -> int | None:
    times = [t for (k, t), n in live.items() if k == key and n > 0]
    if before:
        fits = [t for t in times if t < time or (t == time and not strict)]
        return max(fits, default=None)
    fits = [t for t in times if t > time or (t == time and not strict)]
    return min(fits, default=None)


@pytest.mark.parametrize("merge_min", [0, 4, 1000])
@settings(max_examples=150, deadline=None)
@given(first=st.dictionaries(st.tuples(KEYS, TIMES), st.integers(1, 3), max_size=20),
       changes=CHANGES, queries=st.lists(st.tuples(KEYS, TIMES), min_size=1, max_size=6))
def test_the_index_answers_as_brute_force(
    first: dict, changes: list, queries: list, merge_min: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:  # levels merged always, sometimes, never
        patch.setattr(time_index, "MERGE_MIN", merge_min)
        _against_brute_force(first, changes, queries)


def _against_brute_force(first: dict, changes: list, queries: list) -> None:
    live: Counter = Counter(first)
    index = TimeIndex.of(*_arrays(list(first)), np.array(list(first.values()), dtype=np.int64))
    for change in changes:
        delta: Counter = Counter()
        for key, time, weight in change:
            delta[key, time] += weight
        keys, times = _arrays(list(delta))
        weights = np.array(list(delta.values()), dtype=np.int64)
        if any(live[p] + w < 0 for p, w in delta.items()):
            # not this index's side: the caller rebuilds; the rest of the change goes on
            assert index.updated(keys, times, weights) is None
            delta = Counter({p: w for p, w in delta.items() if live[p] + w >= 0})
            keys, times = _arrays(list(delta))
            weights = np.array(list(delta.values()), dtype=np.int64)
        after = live.copy()
        after.update(delta)
        updated = index.updated(keys, times, weights)
        assert updated is not None
        previous, index, live = index, updated, +after
        points, counts = index.live()
        assert sorted(zip(*split_points(points), strict=True)) == sorted(live)
        assert list(points) == sorted(points)
        assert len(index) == len(points) and counts.tolist() == [
            live[p] for p in zip(*split_points(points), strict=True)]
        keys, times = _arrays(queries)
        assert index.count_at(points_of(keys, times)).tolist() == [live[q] for q in queries]
        for before in (True, False):
            for strict in (True, False):
                found_times, found = index.nearest(keys, times, before, strict)
                expected = [_nearest(live, k, t, before, strict) for k, t in queries]
                got = [int(t) if f else None for t, f in zip(found_times, found, strict=True)]
                assert got == expected
                # two versions at once (a base they share is searched once): the same
                old_times, old_found = previous.nearest(keys, times, before, strict)
                (a, b), (c, d) = nearest_in([previous, index], keys, times, before, strict)
                assert (a[old_found] == old_times[old_found]).all()
                assert (b == old_found).all() and (d == found).all()
                assert (c[found] == found_times[found]).all()
        low = np.minimum(times, times[::-1])
        high = np.maximum(times, times[::-1])
        inside = {
            (k, t) for (k, t) in live for q, lo, hi in zip(keys, low, high, strict=True)
            if k == q and lo <= t <= hi
        }
        assert sorted(zip(*split_points(index.between(keys, low, high)), strict=True)) == \
            sorted(inside)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(KEYS, TIMES, st.integers(-2, 3)), max_size=12),
       ordered=st.booleans())
def test_an_index_of_rows_sums_each_points_weights(rows: list, ordered: bool) -> None:
    if ordered:
        rows = sorted(rows, key=lambda r: (r[0], r[1]))
    live: Counter = Counter()
    for key, time, weight in rows:
        live[key, time] += weight
    keys, times = _arrays([(k, t) for k, t, _ in rows])
    index = TimeIndex.of(keys, times, np.array([w for *_, w in rows], dtype=np.int64), ordered)
    points, counts = index.live()
    assert sorted(zip(*split_points(points), counts.tolist(), strict=True)) == sorted(
        (k, t, n) for (k, t), n in live.items() if n > 0)


@pytest.mark.parametrize(("type_", "values"), [
    ("INTEGER", ["-2147483647", "0", "7"]),
    ("UINTEGER", ["0", "4294967295"]),
    ("TIMESTAMP", ["'-infinity'", "'1969-12-31 23:59:59.999999'", "'2024-02-29 12:00:00'",
                   "'infinity'"]),
    ("TIMESTAMP WITH TIME ZONE", ["'-infinity'", "'2024-02-29 12:00:00+05'", "'infinity'"]),
    ("TIMESTAMP_NS", ["'1677-09-22 00:00:00'", "'2024-02-29 12:00:00.123456789'"]),
    ("DATE", ["'-infinity'", "'0001-01-01'", "'1969-12-31'", "'2024-02-29'", "'infinity'"]),
])
def test_time_codes_order_like_the_times_and_decode_to_them(type_: str, values: list) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE v AS SELECT CAST(x AS {type_}) AS t FROM (VALUES "
                f"{', '.join(f'({v})' for v in values)}) AS s(x)")
    code = time_code_sql("t", type_)
    rows = con.execute(
        f"SELECT {code} AS c, {time_value_sql(code, type_)} = t AS same FROM v ORDER BY t"
    ).fetchall()
    assert [c for c, _ in rows] == sorted({c for c, _ in rows})  # strictly increasing
    assert all(same for _, same in rows)
