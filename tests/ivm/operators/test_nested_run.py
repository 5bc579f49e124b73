"""A recursion's step reads its imports at the working table's keys, not whole."""

from __future__ import annotations

from typing import Any

import pytest

import ivm

REACH = (
    "WITH RECURSIVE r(n) AS (SELECT id FROM src UNION "
    "SELECT e.d FROM r JOIN e ON r.n = e.s) SELECT n FROM r"
)


def test_iterations_read_the_edges_at_the_working_tables_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE e (s BIGINT, d BIGINT); CREATE TABLE src (id BIGINT)")
    chain = [{"s": i, "d": i + 1} for i in range(20)]
    db.ingest({"e": [*chain, {"s": 100, "d": 101}], "src": [{"id": 0}]})
    db.execute(f"CREATE VIEW reach AS {REACH}")
    statements: list[str] = []
    connection = type(db._con)
    execute = connection.execute

    def recorded(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        statements.append(sql)
        return execute(self, sql, *args, **kwargs)

    monkeypatch.setattr(connection, "execute", recorded)
    # 20 → 100 makes 100 and 101 reachable: the iterations after it read the edges of 100
    db.ingest({"e": [{"s": 20, "d": 100}, {"s": 101, "d": 102}]})
    monkeypatch.undo()
    steps = [s for s in statements if "_derived" in s.split(" AS ")[0]]
    assert len(steps) >= 3  # the edges' own step, then one per iteration that derives
    assert not [s for s in steps if '"__ivm_rel_e"' in s]  # never the whole edges' trace
    assert sorted(r["n"] for r in db.read("reach").to_pylist()) == [*range(21), 100, 101, 102]
    assert sorted(r["n"] for r in db.sql(REACH).to_pylist()) == [*range(21), 100, 101, 102]
