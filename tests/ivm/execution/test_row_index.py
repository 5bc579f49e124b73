"""The row index against a model: it accepts a change exactly when both rules hold
(when no two rows share a key hash), flags every ambiguous lookup, and follows
the live rows through applied changes, merges of its levels included.

The hashes here are small integers chosen by the test, so collisions can be forced.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.execution import row_index
from ivm.execution.row_index import Change, Level, RowIndex

# A row is (key, version): its key hash is the key, its row hash key * 10 + version.
rows_strategy = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 2), st.integers(-2, 2).filter(bool)),
    max_size=12,
)


def change_of(rows: Counter) -> Change:
    items = [(k, v, w) for (k, v), w in sorted(rows.items()) if w]
    return Change(
        np.array([k for k, _, _ in items], np.uint64),
        np.array([k * 10 + v for k, v, _ in items], np.uint64),
        np.array([w for _, _, w in items], np.int64),
    )


def rules_hold(live: Counter, change: Counter, keyed: bool) -> bool:
    after = live + Counter()  # copy
    for row, weight in change.items():
        after[row] += weight
    if any(count < 0 for count in after.values()):
        return False
    if keyed:
        per_key = Counter()
        for (key, _), count in after.items():
            per_key[key] += count
        return all(count <= 1 for count in per_key.values())
    return True


@pytest.mark.parametrize("keyed", [True, False])
@settings(max_examples=60, deadline=None)
@given(batches=st.lists(rows_strategy, max_size=25))
def test_accepts_exactly_when_the_rules_hold(keyed, batches):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(row_index, "LEVEL_MIN_ENTRIES", 3)  # merge the levels often
        check_batches(keyed, batches)


def check_batches(keyed: bool, batches: list) -> None:
    index = RowIndex(keyed, Level.empty())
    live: Counter = Counter()
    for batch in batches:
        change: Counter = Counter()
        for key, version, weight in batch:
            if not keyed:
                version = 0  # without a key the key hash is the row: one version per key
            change[(key, version)] += weight
        change = Counter({row: w for row, w in change.items() if w})
        arrays = change_of(change)
        expected = rules_hold(live, change, keyed)
        assert index.accepts(arrays) == expected
        if expected:
            assert index.apply(arrays)
            for row, weight in change.items():
                live[row] += weight
            live = Counter({row: c for row, c in live.items() if c > 0})
            assert len(index) == sum(live.values())


def test_a_shared_key_hash_is_never_resolved_by_guessing():
    # Two live rows whose key hashes collide (a table without a key: two distinct rows).
    index = RowIndex(False, Level(*(np.array(v, t) for v, t in (
        ([5, 5], np.uint64), ([50, 51], np.uint64), ([1, 1], np.int64)))))
    delete = Change(np.array([5], np.uint64), np.array([51], np.uint64), np.array([-1], np.int64))
    assert not index.accepts(delete)
    assert not index.apply(delete)


def test_a_collision_falls_back_to_the_exact_check(monkeypatch):
    """Every change flagged: the SQL check decides, and results stay right."""
    monkeypatch.setattr(RowIndex, "accepts", lambda self, change: False)
    db = ivm.connect()
    db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
    db.ingest("t", [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
    db.ingest("t", pa.table({"id": [1, 1], "v": ["a", "c"], "__w": [-1, 1]}))
    assert "t" not in db._row_indexes  # the index is rebuilt from the trace at next use
    with pytest.raises(ivm.ConstraintError, match="not there"):
        db.ingest("t", pa.table({"id": [2], "v": ["x"], "__w": [-1]}))
    with pytest.raises(ivm.ConstraintError, match="duplicate primary key"):
        db.ingest("t", [{"id": 2, "v": "z"}])
    assert sorted(db.read("t").to_pylist(), key=str) == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}]


@pytest.mark.parametrize("key", ["PRIMARY KEY", ""])
def test_rejected_batches_leave_the_index_as_the_table(tmp_path, key):
    db = ivm.connect(tmp_path / "state")
    db.execute(f"CREATE TABLE t (id BIGINT {key}, v DOUBLE)")
    db.ingest("t", [{"id": i, "v": i / 2} for i in range(10)])
    good = pa.table({"id": [3, 4], "v": [1.5, 2.0], "__w": [-1, -1]})
    bad = pa.table({"id": [5, 99], "v": [2.5, 1.0], "__w": [-1, -1]})
    with pytest.raises(ivm.ConstraintError, match="not there"):
        db.ingest("t", pa.concat_tables([good, bad]))
    db.ingest("t", good)  # the rejected batch deleted nothing, not even these
    with pytest.raises(ivm.ConstraintError, match="not there"):
        db.ingest("t", good)  # …and now they are gone
    db.close()
    reopened = ivm.connect(tmp_path / "state")  # the index is rebuilt from the trace
    with pytest.raises(ivm.ConstraintError, match="not there"):
        reopened.ingest("t", good)
    reopened.ingest("t", pa.table({"id": [5], "v": [2.5], "__w": [-1]}))
    assert reopened.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 7}]


def test_float_zero_and_nan_find_their_rows():
    """-0.0 equals 0.0 and NaN equals NaN as rows (DuckDB's grouping); the hashes agree."""
    db = ivm.connect()
    db.execute("CREATE TABLE t (v DOUBLE)")
    db.ingest("t", [{"v": 0.0}, {"v": float("nan")}])
    db.ingest("t", pa.table({"v": [-0.0, float("nan")], "__w": [-1, -1]}))
    assert db.read("t").num_rows == 0


@pytest.mark.parametrize(
    ("type_", "live", "absent"),
    [("HUGEINT", 0, -1), ("DECIMAL(38,0)", 0, -1), ("INTEGER[]", [], None),
     ("INTEGER[]", [None], [])],
)
def test_values_duckdb_hashes_alike_are_told_apart(
    type_: str, live: object, absent: object
) -> None:
    # DuckDB hashes a 128-bit number as the xor of its halves' hashes (0 and -1 alike)
    # and NULL, [] and [NULL] alike: deleting the absent row must not pass for the live one.
    _absent_row_refused(ivm.connect(), type_, live, absent)


def test_values_duckdb_hashes_alike_are_told_apart_on_spark(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("spark-hugeint")
    with ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS) as db:
        _absent_row_refused(db, "HUGEINT", 0, -1)


def _absent_row_refused(db: Any, type_: str, live: object, absent: object) -> None:
    db.execute(f"CREATE TABLE t (id INTEGER, x {type_})")
    db.execute("CREATE VIEW v AS SELECT id, COUNT(*) AS n FROM t GROUP BY id")
    db.ingest("t", [{"id": 1, "x": live}])
    with pytest.raises(ivm.ConstraintError, match="deletes a row that is not there"):
        db.ingest("t", {"id": [1], "x": [absent], "__w": [-1]})
    assert db.read("v").to_pylist() == [{"id": 1, "n": 1}]
