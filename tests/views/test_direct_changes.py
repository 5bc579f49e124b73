"""A view nothing else reads appends its change and fetches it in one statement
(``views.direct_changes``); any other view keeps its change in a scratch table. Both
paths give the same views and the same returned changes, and a failed epoch undoes a
direct append with everything else."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import ivm
from ivm.views import direct_changes


def scratch_tables(db: ivm.Session) -> set[str]:
    """The views whose change went through a scratch table in this session."""
    rows = db._con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE '__ivm_chg_%'"
    ).fetchall()
    return {r[0].removeprefix("__ivm_chg_") for r in rows}


def rows_of(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """A table's rows as a multiset."""
    return Counter(tuple(r.values()) for r in table.to_pylist())


def recomputed(db: ivm.Session, sql: str) -> Counter[tuple[Any, ...]]:
    return rows_of(db.sql(sql))


VIEWS = {
    "by_k": "SELECT k, SUM(v) AS s, COUNT(*) AS n FROM t GROUP BY k",
    "big": "SELECT id, v FROM t WHERE v > 5",
    "over_big": "SELECT COUNT(*) AS n FROM big",
    "flags": "SELECT id, v > 3 AS high FROM t",
    "tagged": "SELECT id, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID AS tag FROM t",
}


@pytest.fixture
def db() -> Any:
    with ivm.connect() as session:
        session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k VARCHAR, v BIGINT)")
        for name, sql in VIEWS.items():
            session.execute(f"CREATE VIEW {name} AS {sql}")
        yield session


def test_each_view_takes_its_path_and_equals_recomputation(db: ivm.Session) -> None:
    live: dict[int, tuple[str | None, int | None]] = {}
    for epoch in range(6):
        batch = []
        for i in range(epoch * 3, epoch * 3 + 5):  # new rows, and updates of old ones
            if i in live:
                batch.append({"id": i, "k": live[i][0], "v": live[i][1], "__w": -1})
            row = (None if i % 4 == 0 else f"k{i % 3}", None if i % 5 == 0 else i % 9)
            live[i] = row
            batch.append({"id": i, "k": row[0], "v": row[1], "__w": 1})
        before = {name: rows_of(db.read(name)) for name in VIEWS}
        delta = db.ingest("t", batch)
        for name, sql in VIEWS.items():
            assert rows_of(db.read(name)) == recomputed(db, sql), (epoch, name)
            expected = before[name].copy()  # the returned change takes before to after
            for row in delta[name].to_pylist():
                weight = row.pop("__w")
                expected[tuple(row.values())] += weight
            assert +expected == rows_of(db.read(name)), (epoch, name)
    # big is read by over_big, and tagged has a UUID column (a string in ordinary Arrow,
    # not with lossless types): their changes go through scratch; the others are direct,
    # their HUGEINT sum (by_k) and BOOLEAN (flags) returned as ingest returns them.
    assert scratch_tables(db) & set(VIEWS) == {"big", "tagged"}
    delta = db.ingest("t", [{"id": 99, "k": "x", "v": 4}])
    assert delta["flags"].schema.field("high").type == pa.bool_()
    assert delta["by_k"].schema.field("s").type == pa.decimal128(38, 0)
    assert delta["tagged"].schema.field("tag").type == pa.string()


def test_a_failed_epoch_undoes_the_direct_append(db: ivm.Session) -> None:
    db.execute("CREATE TABLE u (s VARCHAR)")
    db.execute("CREATE VIEW parsed AS SELECT CAST(s AS INTEGER) AS n FROM u")
    db.ingest("t", [{"id": 1, "k": "a", "v": 7}])
    before = rows_of(db.read("by_k"))
    with pytest.raises(ivm.IvmError):  # by_k's change is appended before parsed fails
        db.ingest({"t": [{"id": 2, "k": "a", "v": 1}], "u": [{"s": "not a number"}]})
    assert rows_of(db.read("by_k")) == before == recomputed(db, VIEWS["by_k"])
    db.ingest("t", [{"id": 2, "k": "a", "v": 1}])
    assert rows_of(db.read("by_k")) == recomputed(db, VIEWS["by_k"]) == Counter({("a", 8, 2): 1})


def test_large_batches_and_logged_views_take_the_scratch_path(
    db: ivm.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct_changes, "DIRECT_MAX_ROWS", 3)
    db.ingest("t", [{"id": i, "k": "a", "v": i} for i in range(4)])
    assert "by_k" in scratch_tables(db)  # too many rows
    assert rows_of(db.read("by_k")) == recomputed(db, VIEWS["by_k"])
    db.changelog("over_big", retain=5)
    db.ingest("t", [{"id": 10, "k": "b", "v": 9}])
    assert "over_big" in scratch_tables(db)
    assert db.changes("over_big", since=1).num_rows == 2  # the count's old row out, new in
