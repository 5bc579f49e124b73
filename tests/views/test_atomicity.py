"""An error raised by ingest leaves every table and view exactly as before (API.md, "Errors").

Each case ingests a good batch into one table and a bad batch into another in the same
call; nothing may change, and a following good ingest must give correct results.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from oracle.rows import rows

import ivm

SCHEMA = """
    CREATE TABLE a (id BIGINT PRIMARY KEY, g VARCHAR, v BIGINT);
    CREATE TABLE b (id BIGINT PRIMARY KEY, a_id BIGINT, label VARCHAR NOT NULL);
    CREATE VIEW a_sum AS SELECT g, SUM(v) AS total, COUNT(*) AS n FROM a GROUP BY g;
    CREATE VIEW ab AS SELECT a.id, a.g, b.label FROM a JOIN b ON a.id = b.a_id;
    CREATE VIEW labels AS SELECT DISTINCT label FROM b;
    CREATE VIEW counts AS SELECT COUNT(*) AS n FROM ab;
"""
NAMES = ("a", "b", "a_sum", "ab", "labels", "counts")




def snapshot(db) -> dict[str, list[tuple]]:
    return {name: rows(db.read(name)) for name in NAMES}


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute(SCHEMA)
    session.ingest(
        {
            "a": [{"id": 1, "g": "x", "v": 10}, {"id": 2, "g": "y", "v": 20}],
            "b": [{"id": 100, "a_id": 1, "label": "p"}],
        }
    )
    yield session
    session.close()


GOOD_A = [{"id": 3, "g": "x", "v": 5}]

BAD_B = {
    "unknown column": (
        ivm.SchemaError,
        [{"id": 101, "a_id": 2, "label": "q", "colour": "red"}],
    ),
    "missing column": (ivm.SchemaError, [{"id": 101, "a_id": 2}]),
    "delete missing row": (
        ivm.ConstraintError,
        [{"id": 999, "a_id": 2, "label": "q", "__w": -1}],
    ),
    "delete row with wrong values": (
        ivm.ConstraintError,
        [{"id": 100, "a_id": 1, "label": "other", "__w": -1}],
    ),
    "duplicate key with existing row": (
        ivm.ConstraintError,
        [{"id": 100, "a_id": 2, "label": "q"}],
    ),
    "duplicate key within batch": (
        ivm.ConstraintError,
        [{"id": 101, "a_id": 2, "label": "q"}, {"id": 101, "a_id": 1, "label": "r"}],
    ),
    "weight 2 on a keyed row": (
        ivm.ConstraintError,
        [{"id": 101, "a_id": 2, "label": "q", "__w": 2}],
    ),
    "NULL primary key": (ivm.ConstraintError, [{"id": None, "a_id": 2, "label": "q"}]),
    "NULL in NOT NULL column": (ivm.ConstraintError, [{"id": 101, "a_id": 2, "label": None}]),
    "lossy cast": (
        ivm.SchemaError,
        pa.table({"id": [101.5], "a_id": [2], "label": ["q"]}),
    ),
    "not a batch": (ivm.SchemaError, 42),
}


@pytest.mark.parametrize("case", list(BAD_B))
def test_bad_table_in_multi_table_ingest_changes_nothing(db, case):
    error, bad = BAD_B[case]
    before = snapshot(db)
    with pytest.raises(error):
        db.ingest({"a": GOOD_A, "b": bad})
    assert db.epoch == 1
    assert snapshot(db) == before
    # the session is still usable and gives correct results
    delta = db.ingest({"a": GOOD_A, "b": [{"id": 101, "a_id": 3, "label": "q"}]})
    assert db.epoch == 2
    assert rows(delta["a_sum"]) == [("x", 10, 1, -1), ("x", 15, 2, 1)]
    assert rows(delta["ab"]) == [(3, "x", "q", 1)]
    assert rows(delta["labels"]) == [("q", 1)]
    assert rows(delta["counts"]) == [(1, -1), (2, 1)]
    assert rows(db.read("a")) == [(1, "x", 10), (2, "y", 20), (3, "x", 5)]
    assert rows(db.read("ab")) == [(1, "x", "p"), (3, "x", "q")]
    assert rows(db.read("labels")) == [("p",), ("q",)]
    assert rows(db.read("counts")) == [(2,)]


def test_bad_first_table_also_changes_nothing(db):
    before = snapshot(db)
    with pytest.raises(ivm.ConstraintError):
        db.ingest({"b": [{"id": 100, "a_id": 1, "label": "dup"}], "a": GOOD_A})
    assert db.epoch == 1
    assert snapshot(db) == before


def test_unknown_table_in_multi_table_ingest_changes_nothing(db):
    before = snapshot(db)
    with pytest.raises(ivm.SchemaError):
        db.ingest({"a": GOOD_A, "nope": [{"id": 1}]})
    assert db.epoch == 1
    assert snapshot(db) == before


def test_ingest_into_view_is_refused(db):
    before = snapshot(db)
    with pytest.raises(ivm.SchemaError):
        db.ingest({"a": GOOD_A, "a_sum": [{"g": "z", "total": 1, "n": 1}]})
    assert snapshot(db) == before


def test_single_table_failure_leaves_epoch_and_deltas_consistent(db):
    with pytest.raises(ivm.ConstraintError):
        db.ingest("a", [{"id": 1, "g": "x", "v": 10, "__w": -2}])
    assert db.epoch == 1
    # deltas returned afterwards still sum to the view contents
    delta = db.ingest("a", [{"id": 1, "g": "x", "v": 10, "__w": -1}])
    assert rows(delta["a_sum"]) == [("x", 10, 1, -1)]
    assert rows(delta["ab"]) == [(1, "x", "p", -1)]
    assert rows(db.read("a_sum")) == [("y", 20, 1)]
    assert rows(db.read("ab")) == []
    assert rows(db.read("counts")) == [(0,)]


def test_many_failures_in_a_row_then_success(db):
    before = snapshot(db)
    for _case, (error, bad) in BAD_B.items():
        with pytest.raises(error):
            db.ingest({"a": GOOD_A, "b": bad})
    assert db.epoch == 1
    assert snapshot(db) == before
    db.ingest("b", [{"id": 101, "a_id": 2, "label": "p"}])
    assert rows(db.read("ab")) == [(1, "x", "p"), (2, "y", "p")]
    assert rows(db.read("labels")) == [("p",)]


def test_upsert_mode_failure_changes_nothing(db):
    before = snapshot(db)
    with pytest.raises(ivm.ConstraintError):
        db.ingest(
            {
                "a": [{"id": 1, "g": "y", "v": 99}],  # would replace row 1
                "b": [{"id": 101, "a_id": 1, "label": None}],
            },
            mode="upsert",
        )
    assert db.epoch == 1
    assert snapshot(db) == before
    delta = db.ingest("a", [{"id": 1, "g": "y", "v": 99}], mode="upsert")
    assert rows(delta["a_sum"]) == [("x", 10, 1, -1), ("y", 20, 1, -1), ("y", 119, 2, 1)]
    assert rows(db.read("ab")) == [(1, "y", "p")]


def test_view_evaluation_error_changes_nothing():
    db = ivm.connect()
    db.execute("""
        CREATE TABLE t (id BIGINT PRIMARY KEY, code VARCHAR);
        CREATE TABLE u (id BIGINT PRIMARY KEY);
        CREATE VIEW n AS SELECT COUNT(*) AS n FROM u;
        CREATE VIEW codes AS SELECT id, CAST(code AS INTEGER) AS code FROM t;
    """)
    db.ingest({"t": [{"id": 1, "code": "7"}], "u": [{"id": 1}]})
    with pytest.raises(ivm.IvmError) as info:
        db.ingest({"u": [{"id": 2}], "t": [{"id": 2, "code": "not a number"}]})
    assert isinstance(info.value, ivm.ExecutionError)
    assert db.epoch == 1
    assert rows(db.read("t")) == [(1, "7")]
    assert rows(db.read("u")) == [(1,)]
    assert rows(db.read("n")) == [(1,)]
    assert rows(db.read("codes")) == [(1, 7)]
    delta = db.ingest({"u": [{"id": 2}], "t": [{"id": 2, "code": "8"}]})
    assert rows(delta["n"]) == [(1, -1), (2, 1)]
    assert rows(delta["codes"]) == [(2, 8, 1)]
