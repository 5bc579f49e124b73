"""execution.key_match: the rows a lookup found by hash are kept only where their key
equals a probe's by value, as DuckDB compares, or left to SQL where Arrow cannot tell."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ivm.execution.key_match import PROBE_HASH, key_matches, rows_at_keys
from ivm.storage.arrangement import Batch


def _found(rows: dict[str, list], key_hashes: list[int]) -> Batch:
    """A lookup's result: ``rows`` with the key hashes they were found by."""
    n = len(key_hashes)
    return Batch(pa.table(rows), np.array(key_hashes, np.uint64),
                 np.arange(n, dtype=np.uint64), np.ones(n, np.int64))


def _probes(keys: dict[str, list], hashes: list[int]) -> pa.Table:
    return pa.table({**keys, PROBE_HASH: pa.array(hashes, pa.uint64())})


def test_rows_at_keys_drop_another_keys_rows_sharing_its_hash() -> None:
    # Keys 1 and 2 collide on hash 7: a read at key 1 keeps key 1's rows only.
    found = _found({"k": [1, 2, 1], "v": ["a", "b", "c"]}, [7, 7, 7])
    rows = rows_at_keys(found, _probes({"k": [1]}, [7]), ["k"], nulls=True)
    assert rows is not None and rows.column("v").to_pylist() == ["a", "c"]


def test_rows_at_keys_follow_duckdb_equality() -> None:
    nan, found = float("nan"), _found({"k": [None, float("nan"), -0.0]}, [1, 2, 3])
    probes = _probes({"k": [None, nan, 0.0]}, [1, 2, 3])
    grouped = rows_at_keys(found, probes, ["k"], nulls=True)  # NULL matches NULL
    joined = rows_at_keys(found, probes, ["k"], nulls=False)  # a NULL key matches nothing
    assert grouped is not None and grouped.num_rows == 3
    assert joined is not None and joined.num_rows == 2


def test_rows_at_keys_leave_what_arrow_cannot_compare_to_sql() -> None:
    lists = _found({"k": [[1], [2]]}, [5, 5])
    assert rows_at_keys(lists, _probes({"k": [[1]]}, [5]), ["k"], nulls=True) is None
    # Two probes sharing a hash: which one a row belongs to is not a lookup away.
    ints = _found({"k": [1, 2]}, [5, 5])
    assert rows_at_keys(ints, _probes({"k": [1, 2]}, [5, 5]), ["k"], nulls=True) is None


def test_key_matches_say_which_key_each_row_is_at() -> None:
    # Rows of keys 2 and 1 (hashes 9 and 4) and a stranger sharing key 1's hash.
    found = _found({"k": [2, 1, 3]}, [9, 4, 4])
    keys = pa.table({"k": [1, 2]})
    matched = key_matches(found, keys, np.array([4, 9], np.uint64), ["k"], nulls=True)
    assert matched is not None
    kept, at = matched
    assert kept.tolist() == [0, 1] and at.tolist() == [1, 0]
