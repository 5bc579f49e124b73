"""A persistent session saves its in-memory indexes when it closes; the next open takes
them back instead of building them from the traces, and builds them whenever the snapshot
cannot be trusted. Every epoch's results are checked against DuckDB recomputing them."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from oracle.rows import rows

import ivm
from ivm.errors import ConstraintError
from ivm.execution.row_index import RowIndex
from ivm.operators import asof_indexed
from ivm.storage import snapshots
from ivm.storage.snapshots import snapshot_dir
from ivm.views import saved_indexes
from ivm.views.state_file import STATE_FILE

DDL = """
    CREATE TABLE trades (id BIGINT PRIMARY KEY, sym VARCHAR, ts INTEGER, qty INTEGER);
    CREATE TABLE quotes (sym VARCHAR, ts INTEGER, price INTEGER);
    CREATE VIEW priced AS SELECT t.id, t.ts, t.qty, q.price, q.ts AS quote_ts
        FROM trades t ASOF LEFT JOIN quotes q ON t.sym = q.sym AND t.ts >= q.ts;
"""
RECOMPUTE = ("SELECT t.id, t.ts, t.qty, q.price, q.ts AS quote_ts FROM trades t "
             "ASOF LEFT JOIN quotes q ON t.sym = q.sym AND t.ts >= q.ts")


def batch(columns: tuple[str, ...], rows_: tuple[tuple, ...]) -> pa.Table:
    """Rows of ``columns``, each with weight 1 unless it gives one after them."""
    names = (*columns, "__w")
    return pa.Table.from_pylist([dict(zip(names, (*r, 1)[:len(names)], strict=True))
                                 for r in rows_])


def trades(*rows_: tuple) -> pa.Table:
    return batch(("id", "sym", "ts", "qty"), rows_)


def quotes(*rows_: tuple) -> pa.Table:
    return batch(("sym", "ts", "price"), rows_)


def check(db: ivm.Session) -> None:
    """The view equals DuckDB's ASOF JOIN over the tables now."""
    plain = duckdb.connect()
    for table in ("trades", "quotes"):
        plain.register(f"{table}_now", db.read(table))
        plain.execute(f"CREATE TABLE {table} AS SELECT * FROM {table}_now")
    assert rows(db.read("priced")) == rows(plain.sql(RECOMPUTE).to_arrow_table())


def first_session(path) -> ivm.Session:
    db = ivm.connect(path)
    db.execute(DDL)
    db.ingest({"trades": trades((1, "a", 10, 5), (2, "a", 20, 6), (3, "b", 15, 7)),
               "quotes": quotes(("a", 5, 100), ("a", 12, 101), ("b", 1, 200))})
    db.ingest({"quotes": quotes(("a", 18, 102), ("b", 14, 201))})  # late quotes: indexes built
    check(db)
    return db


@pytest.fixture
def builds(monkeypatch):
    """Counts of indexes built from the traces: row indexes, ASOF time indexes."""
    counts = {"row": 0, "time": 0}
    load_rows, load_times = RowIndex.load.__func__, asof_indexed._load

    def row_load(cls, *args):
        counts["row"] += 1
        return load_rows(cls, *args)

    def time_load(*args):
        counts["time"] += 1
        return load_times(*args)

    monkeypatch.setattr(RowIndex, "load", classmethod(row_load))
    monkeypatch.setattr(asof_indexed, "_load", time_load)
    return counts


def later_batches(db: ivm.Session) -> None:
    db.ingest({"quotes": quotes(("a", 11, 103), ("b", 1, 200, -1))})  # late, and a delete
    check(db)
    db.ingest({"trades": trades((4, "a", 25, 1), (2, "a", 20, 6, -1)),
               "quotes": quotes(("a", 21, 104))})
    check(db)
    with pytest.raises(ConstraintError):  # the row index still knows trade 1's key
        db.ingest({"trades": trades((1, "a", 30, 9))})
    with pytest.raises(ConstraintError):  # … and that quote ("a", 5) is there once
        db.ingest({"quotes": quotes(("a", 5, 100, -1), ("a", 5, 100, -1))})
    check(db)


@pytest.fixture(params=["read whole", "memory-mapped"])
def mapped(request, monkeypatch):
    """Saved arrays read whole (small) or memory-mapped (read-only, and copy-on-write for
    the row index's counts), as large ones are."""
    if request.param == "memory-mapped":
        monkeypatch.setattr(snapshots, "MAPPED_BYTES", 0)
    return request.param


def test_a_clean_close_saves_the_indexes_for_the_next_open(tmp_path, builds, mapped):
    first_session(tmp_path).close()
    built = dict(builds)
    assert built == {"row": 2, "time": 1}
    assert snapshot_dir(tmp_path / STATE_FILE).is_dir()
    with ivm.connect(tmp_path) as db:
        later_batches(db)
        assert builds == built  # nothing built again: all taken back
        if mapped == "memory-mapped":
            assert isinstance(db._row_indexes["quotes"].levels[0].keys, np.memmap)
    with ivm.connect(tmp_path) as db:  # saved again at that close
        db.ingest({"quotes": quotes(("b", 16, 202))})
        check(db)
        assert builds == built


def test_an_open_without_a_clean_close_after_it_builds_them_again(tmp_path, builds):
    first_session(tmp_path).close()
    db = ivm.connect(tmp_path)
    db.ingest({"quotes": quotes(("a", 11, 103))})
    db._ready = False  # as if the process died: no snapshot saved at its end
    db.close()
    with ivm.connect(tmp_path) as again:  # the snapshot was taken by the last open
        later_batches(again)
        assert builds == {"row": 4, "time": 2}


def test_state_changed_elsewhere_is_not_trusted(tmp_path, builds):
    first_session(tmp_path).close()
    con = duckdb.connect(str(tmp_path / STATE_FILE))  # another program moves the epoch on
    con.execute("UPDATE __ivm_meta SET epoch = epoch + 1")
    con.close()
    with ivm.connect(tmp_path) as db:
        later_batches(db)
        assert builds == {"row": 4, "time": 2}  # built anew from the traces


def test_a_table_dropped_and_made_again_drops_its_saved_index(tmp_path, builds):
    first_session(tmp_path).close()
    with ivm.connect(tmp_path) as db:
        db.execute("DROP VIEW priced; DROP TABLE quotes; "
                   "CREATE TABLE quotes (sym VARCHAR, ts INTEGER, price INTEGER)")
    with ivm.connect(tmp_path) as again:  # trades' index saved, not the old quotes'
        again.ingest({"quotes": quotes(("a", 5, 100))})
        with pytest.raises(ConstraintError):  # the old quotes are gone: nothing to delete
            again.ingest({"quotes": quotes(("a", 12, 101, -1))})
        with pytest.raises(ConstraintError):  # trade 1 is still there
            again.ingest({"trades": trades((1, "a", 30, 9))})
        assert rows(again.read("quotes")) == rows(pa.table({"sym": ["a"], "ts": [5],
                                                            "price": [100]}))
    assert builds == {"row": 3, "time": 1}


def test_other_versions_build_them_again(tmp_path, builds, monkeypatch):
    first_session(tmp_path).close()
    monkeypatch.setattr(saved_indexes, "_ivm_version", lambda: "another")
    with ivm.connect(tmp_path) as db:
        later_batches(db)
        assert builds == {"row": 4, "time": 2}


def test_other_row_hashes_build_them_again(tmp_path, builds, monkeypatch):
    first_session(tmp_path).close()
    original = saved_indexes.hash_columns_sql
    monkeypatch.setattr(saved_indexes, "hash_columns_sql",  # as a release that hashes anew
                        lambda table: original(table).replace("hash(", "hash(42, "))
    with ivm.connect(tmp_path) as db:
        db.ingest({"quotes": quotes(("b", 16, 202))})
        assert builds == {"row": 3, "time": 2}


def test_indexes_left_half_updated_are_dropped_and_built_again(tmp_path, builds, monkeypatch):
    first_session(tmp_path).close()
    with ivm.connect(tmp_path) as db:
        def failing(*args):
            raise MemoryError("no room to merge")
        with monkeypatch.context() as patch:
            patch.setattr(RowIndex, "apply", failing)
            with pytest.raises(MemoryError):  # after the commit: the epoch stands
                db.ingest({"quotes": quotes(("a", 11, 103))})
        assert db.epoch == 3
        assert not db._row_indexes and not db._operator_memory
        check(db)
        later_batches(db)  # every index built from the traces again
        assert builds == {"row": 4, "time": 2}
    with ivm.connect(tmp_path) as db:  # and those were saved
        db.ingest({"quotes": quotes(("b", 16, 202))})
        check(db)
        assert builds == {"row": 4, "time": 2}


def test_a_failing_save_still_closes_and_releases_the_state(tmp_path, monkeypatch):
    db = first_session(tmp_path)
    monkeypatch.setattr(saved_indexes, "save_snapshot",
                        lambda *args: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        db.close()
    monkeypatch.undo()
    with ivm.connect(tmp_path) as again:  # not "already open in this process"
        later_batches(again)


def test_a_damaged_snapshot_is_rebuilt(tmp_path, builds):
    first_session(tmp_path).close()
    for file in snapshot_dir(tmp_path / STATE_FILE).glob("*.npy"):
        file.write_bytes(b"damaged")
    with ivm.connect(tmp_path) as db:
        later_batches(db)
        assert builds == {"row": 4, "time": 2}


@pytest.fixture
def describes(monkeypatch):
    """DESCRIBEs DuckDB is asked, counted."""
    asked = []
    original = saved_indexes.describe

    def counted(con, sql):
        asked.append(sql)
        return original(con, sql)

    monkeypatch.setattr(saved_indexes, "describe", counted)
    return asked


def test_planning_at_open_asks_duckdb_only_once(tmp_path, describes):
    first_session(tmp_path).close()
    describes.clear()
    with ivm.connect(tmp_path) as db:  # plans from DuckDB's answers (no snapshot of them yet)
        planned = db.explain("priced")
    assert describes
    describes.clear()
    with ivm.connect(tmp_path) as db:  # the answers saved at the last close
        assert db.explain("priced") == planned
        later_batches(db)
    assert describes == []


def test_answers_about_changed_tables_are_not_saved(tmp_path, describes):
    with ivm.connect(tmp_path) as db:
        db.execute("CREATE TABLE t (x INTEGER); CREATE VIEW v AS SELECT x + 1 AS y FROM t")
        db.ingest("t", [{"x": 1}])
    with ivm.connect(tmp_path) as db:
        db.execute("CREATE OR REPLACE TABLE t (x DOUBLE)")  # v is created again over it
        db.ingest("t", [{"x": 1.5}])
    for _ in range(2):  # the first open asks DuckDB, the second reads what it answered
        with ivm.connect(tmp_path) as db:
            assert dict(db.views["v"].columns) == {"y": "DOUBLE"}
            assert db.read("v").to_pylist() == [{"y": 2.5}]


def test_every_tpch_view_plans_alike_from_the_saved_answers(tmp_path, describes):
    import tpch_workload as tpch

    with ivm.connect(tmp_path) as db:
        db.execute(tpch.ddl())
        for name, sql in tpch.queries().items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
    with ivm.connect(tmp_path) as db:  # planned from DuckDB's answers
        planned = {name: db.explain(name) for name in db.views}
    describes.clear()
    with ivm.connect(tmp_path) as db:  # from the answers the last close saved
        assert {name: db.explain(name) for name in db.views} == planned
    assert len(planned) == 22 and describes == []


def test_a_first_load_builds_the_time_indexes_itself(tmp_path, builds):
    with ivm.connect(tmp_path) as db:
        db.execute(DDL)
        db.ingest({"trades": trades((1, "a", 10, 5)), "quotes": quotes(("a", 5, 100))})
        assert builds["time"] == 1  # after the load's commit: the next epoch finds them
        db.ingest({"quotes": quotes(("a", 7, 101))})
        check(db)
        assert builds["time"] == 1
