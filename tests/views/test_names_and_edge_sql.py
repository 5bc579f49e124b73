"""Names (case, quotes, reserved prefix) and SQL edge cases found in review."""

from __future__ import annotations

import duckdb
import pytest
from oracle.rows import rows

import ivm
import ivm.storage.traces


def test_union_by_name_matches_columns_by_name() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE t (a INT, b INT)")
    sql = "SELECT a, b FROM t UNION ALL BY NAME SELECT b, a FROM t"
    db.execute(f"CREATE VIEW v AS {sql}")
    db.ingest("t", [{"a": 1, "b": 2}])
    assert db.read("v").to_pylist() == [{"a": 1, "b": 2}, {"a": 1, "b": 2}]


@pytest.mark.parametrize("name", ["__ivm_chg_x", "__IVM_rel_t"])
def test_internal_prefix_is_reserved(name: str) -> None:
    db = ivm.connect()
    with pytest.raises(ivm.SqlError, match="reserved"):
        db.execute(f'CREATE TABLE "{name}" (a INT)')


def test_repeated_group_key_and_boolean_sum_match_duckdb() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE t (a INT, flag BOOLEAN)")
    sql = "SELECT a, SUM(flag) AS s, COUNT(*) AS n FROM t GROUP BY a, t.a"
    db.execute(f"CREATE VIEW v AS {sql}")
    data = [{"a": 1, "flag": True}, {"a": 1, "flag": True}, {"a": 2, "flag": False},
            {"a": 2, "flag": None}]
    db.ingest("t", data)
    db.ingest("t", [{"a": 1, "flag": True, "__w": -1}])
    oracle = duckdb.connect()
    oracle.execute("CREATE TABLE t (a INT, flag BOOLEAN)")
    oracle.execute("INSERT INTO t VALUES (1, true), (2, false), (2, NULL)")
    assert rows(db.read("v")) == rows(oracle.sql(sql).to_arrow_table())


def test_names_ignore_case_like_duckdb() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE Orders (Id BIGINT, amount INT, PRIMARY KEY (ID))")
    db.execute("CREATE VIEW Totals AS SELECT SUM(amount) AS s FROM orders")
    db.ingest("ORDERS", [{"Id": 1, "amount": 5}])
    assert rows(db.read("totals")) == [(5,)]
    db.execute("CREATE TABLE IF NOT EXISTS orders (x INT)")  # exists: nothing happens
    db.execute("DROP VIEW TOTALS; DROP TABLE orders")
    assert db.tables == {} and db.views == {}


def test_quoted_names_survive_reopen(tmp_path) -> None:
    with ivm.connect(tmp_path / "s") as db:
        db.execute('CREATE TABLE "a""" (x INT); CREATE VIEW "v""" AS SELECT x + 1 AS y FROM "a"""')
        db.ingest('a"', [{"x": 1}])
    with ivm.connect(tmp_path / "s") as db:
        assert rows(db.read('v"')) == [(2,)]
        assert db.epoch == 1


def test_failed_compaction_does_not_fail_a_committed_ingest(monkeypatch) -> None:
    def broken(*_args: object) -> int:
        raise duckdb.IOException("disk full (simulated)")

    monkeypatch.setattr(ivm.storage.traces, "COMPACT_MIN_ROWS", 1)
    monkeypatch.setattr(ivm.storage.traces, "compact", broken)
    db = ivm.connect()
    db.execute("CREATE TABLE t (a INT); CREATE VIEW v AS SELECT COUNT(*) AS n FROM t")
    for i in range(3):
        with pytest.warns(UserWarning, match="compaction failed"):
            db.ingest("t", [{"a": i}])
    assert db.epoch == 3
    assert rows(db.read("v")) == [(3,)]
