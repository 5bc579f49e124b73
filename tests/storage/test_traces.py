"""storage.traces: append-only traces, their bag readers, and compaction.

Compaction must never change what a trace means: the reader shows the same bag, and a
session whose traces are compacted after many epochs gives the same view contents (and
deltas) as one whose traces never are.
"""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pyarrow as pa
import pytest

import ivm
import ivm.storage.traces as traces
from ivm.schema import Column, Schema
from ivm.storage.traces import Compactor, TailSize, compact, create_reader, create_trace

SCHEMA = Schema((Column("k", "VARCHAR"), Column("v", "BIGINT")))


@pytest.fixture
def con():
    connection = duckdb.connect()
    create_trace(connection, "tr", [(c.name, c.type) for c in SCHEMA.columns])
    create_reader(connection, "bag", "tr", SCHEMA.names)
    yield connection
    connection.close()


def trace_rows(con, table: str = "tr") -> list[tuple]:
    return con.execute(f"SELECT * FROM {table}").fetchall()


def bag(con, name: str = "bag") -> Counter:
    return Counter(con.execute(f'SELECT * FROM "{name}"').fetchall())


def test_create_trace_has_weight_column(con):
    columns = [(r[0], r[1]) for r in con.execute("DESCRIBE tr").fetchall()]
    assert columns == [("k", "VARCHAR"), ("v", "BIGINT"), ("__w", "BIGINT")]


def test_reader_shows_one_row_per_live_copy(con):
    con.execute(
        "INSERT INTO tr VALUES ('a', 1, 2), ('a', 1, 1), ('b', 2, 1), ('b', 2, -1), "
        "('c', NULL, 1), ('d', 4, -1)"
    )
    # a: 3 copies; b: gone; c: NULL kept; d: net negative is not shown
    assert bag(con) == Counter({("a", 1): 3, ("c", None): 1})


def test_compact_consolidates_drops_zeros_and_sorts_by_key(con):
    con.execute(
        "INSERT INTO tr VALUES ('z', 1, 1), ('a', 1, 2), ('m', 5, 1), ('a', 1, -1), "
        "('m', 5, -1), ('b', NULL, 1), ('b', NULL, 1), ('a', 2, 1)"
    )
    before = bag(con)
    kept = compact(con, "tr", ["k", "v"])
    assert kept == 4
    assert trace_rows(con) == [("a", 1, 1), ("a", 2, 1), ("b", None, 2), ("z", 1, 1)]
    assert bag(con) == before
    # compacting again changes nothing
    assert compact(con, "tr", ["k", "v"]) == 4
    assert trace_rows(con) == [("a", 1, 1), ("a", 2, 1), ("b", None, 2), ("z", 1, 1)]


def test_compact_without_key_and_empty_trace(con):
    assert compact(con, "tr", ()) == 0
    con.execute("INSERT INTO tr VALUES ('a', 1, 1), ('a', 1, -1)")
    assert compact(con, "tr", ()) == 0
    assert trace_rows(con) == []


def test_compact_keeps_negative_net_weights(con):
    # operator state may hold rows whose net weight is negative mid-way; only zeros go
    con.execute("INSERT INTO tr VALUES ('a', 1, -2), ('a', 1, 1)")
    assert compact(con, "tr", ["k"]) == 1
    assert trace_rows(con) == [("a", 1, -1)]


def test_tail_size_is_due():
    size = TailSize(base=0, appended=traces.COMPACT_MIN_ROWS - 1)
    assert not size.due()
    size.appended += 1
    assert size.due()
    big = TailSize(base=10 * traces.COMPACT_MIN_ROWS, appended=traces.COMPACT_MIN_ROWS)
    assert not big.due()  # the tail is small next to the base
    big.appended = int(traces.COMPACT_FRACTION * big.base)
    assert big.due()


def rows_counted(size: TailSize) -> tuple[int, int]:
    """The rows a tail size counts: kept at the last compaction, appended since."""
    return size.base, size.appended


def test_a_tail_of_inserts_is_never_due_where_retractions_are_counted():
    size = TailSize(base=10 * traces.COMPACT_MIN_ROWS, retractions_known=True)
    size.appended = 99 * size.base  # a load in many epochs: nothing to drop
    assert not size.due()
    rows = size.base + size.appended
    # the retractions and the rows they cancel against the rest: due at half the live rows
    size.retracted = int(rows * traces.COMPACT_FRACTION / (2 + 2 * traces.COMPACT_FRACTION))
    assert not size.due()  # (against the first epoch's rows only, long due already)
    size.retracted += 1
    assert size.due()
    size.compacted(7)
    assert (size.base, size.appended, size.retracted, size.retractions_known) == (7, 0, 0, True)


def test_compactor_compacts_only_due_traces(con, monkeypatch):
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 4)
    create_trace(con, "other", [(c.name, c.type) for c in SCHEMA.columns])
    compactor = Compactor()
    con.execute("INSERT INTO tr VALUES ('a', 1, 1), ('a', 1, 1), ('a', 1, -1), ('b', 1, 1)")
    compactor.appended("tr", 4)
    con.execute("INSERT INTO other VALUES ('a', 1, 1), ('a', 1, 1)")
    compactor.appended("other", 2)
    compactor.compact_due(con, {"tr": ("k",), "other": ("k",)})
    assert trace_rows(con) == [("a", 1, 1), ("b", 1, 1)]
    assert len(trace_rows(con, "other")) == 2  # not due: untouched
    assert rows_counted(compactor.sizes["tr"]) == (2, 0)
    assert compactor.sizes["other"].appended == 2
    compactor.forget("other")
    assert "other" not in compactor.sizes


def test_a_first_load_into_an_empty_trace_is_not_compacted_again(con, monkeypatch):
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 4)
    compactor = Compactor()
    compactor.created("tr")
    compactor.appended("tr", 0, consolidated=True)  # an epoch that changed nothing
    compactor.appended("tr", 10, consolidated=True)  # the first contents, each row once
    assert rows_counted(compactor.sizes["tr"]) == (10, 0)
    compactor.appended("tr", 10, consolidated=True)  # not empty any more: a tail
    assert rows_counted(compactor.sizes["tr"]) == (10, 10)


def test_a_views_first_contents_count_as_its_compacted_base(monkeypatch):
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 4)
    db = ivm.connect()
    db.execute(DDL)
    trace = db._names.relation_trace("revenue")
    assert db._compactor.sizes[trace].empty  # created over empty tables
    orders = pa.table({"id": list(range(20)), "customer": [f"c{i}" for i in range(20)],
                       "amount": list(range(20))})
    db.ingest({"orders": orders})  # the view's first rows: already consolidated
    assert rows_counted(db._compactor.sizes[trace]) == (20, 0)

    later = ivm.connect()
    later.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT)")
    later.ingest({"orders": orders})
    later.execute("CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders "
                  "GROUP BY customer")  # backfilled: its rows are its base
    assert rows_counted(later._compactor.sizes[later._names.relation_trace("revenue")]) == (20, 0)


# -- compaction inside a session -----------------------------------------------------------

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE TABLE customers (name VARCHAR PRIMARY KEY, city VARCHAR);
    CREATE VIEW revenue AS
        SELECT customer, SUM(amount) AS total, COUNT(*) AS n, MIN(amount) AS lo,
               MAX(amount) AS hi
        FROM orders GROUP BY customer;
    CREATE VIEW by_city AS
        SELECT c.city, COUNT(*) AS n, SUM(o.amount) AS total
        FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.city;
    CREATE VIEW active AS SELECT DISTINCT customer FROM orders;
    CREATE VIEW grand AS SELECT COUNT(*) AS n, SUM(amount) AS total FROM orders;
"""
VIEWS = ("revenue", "by_city", "active", "grand")
RECOMPUTE = {
    "revenue": "SELECT customer, SUM(amount), COUNT(*), MIN(amount), MAX(amount) FROM orders "
    "GROUP BY customer",
    "by_city": "SELECT c.city, COUNT(*), SUM(o.amount) FROM orders o JOIN customers c "
    "ON o.customer = c.name GROUP BY c.city",
    "active": "SELECT DISTINCT customer FROM orders",
    "grand": "SELECT COUNT(*), SUM(amount) FROM orders",
}


def workload(epochs: int, seed: int = 7):
    """Batches of random inserts, updates and deletes against a model of the tables."""
    rng = random.Random(seed)
    customers = ["ann", "bob", "cy", "dan", "eve"]
    live: dict[int, tuple[str, int]] = {}
    next_id = 0
    batches = [
        {
            "customers": [
                {"name": c, "city": rng.choice(["oslo", "rome", "lima"])} for c in customers
            ]
        }
    ]
    city = {row["name"]: row["city"] for row in batches[0]["customers"]}
    for _ in range(epochs):
        changes = []
        for _ in range(rng.randint(1, 6)):
            action = rng.random()
            if action < 0.5 or not live:
                row = (rng.choice(customers), rng.randint(1, 50))
                live[next_id] = row
                changes.append({"id": next_id, "customer": row[0], "amount": row[1], "__w": 1})
                next_id += 1
            else:
                key = rng.choice(sorted(live))
                old = live.pop(key)
                changes.append({"id": key, "customer": old[0], "amount": old[1], "__w": -1})
                if action < 0.8:
                    new = (old[0], rng.randint(1, 50))
                    live[key] = new
                    changes.append({"id": key, "customer": new[0], "amount": new[1], "__w": 1})
        batch = {"orders": changes}
        if rng.random() < 0.1:
            name = rng.choice(customers)
            moved = rng.choice(["oslo", "rome", "lima"])
            batch["customers"] = [
                {"name": name, "city": city[name], "__w": -1},
                {"name": name, "city": moved, "__w": 1},
            ]
            city[name] = moved
        batches.append(batch)
    return batches


def rows(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def trace_sizes(db) -> dict[str, int]:
    tables = db._con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, '__ivm_rel_') "
        "OR starts_with(table_name, '__ivm_op_')"  # (LIKE's _ took __ivm_relation_epochs)
    ).fetchall()
    return {t: db._con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for (t,) in tables}


def test_compacted_session_matches_uncompacted(monkeypatch):
    batches = workload(60)
    plain = ivm.connect()
    plain.execute(DDL)
    plain_deltas = [plain.ingest(b) for b in batches]
    plain_sizes = trace_sizes(plain)

    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 8)
    compacted = ivm.connect()
    compacted.execute(DDL)
    for batch, expected in zip(batches, plain_deltas, strict=True):
        delta = compacted.ingest(batch)
        assert {v: rows(t) for v, t in delta.items()} == {v: rows(t) for v, t in expected.items()}
    sizes = trace_sizes(compacted)

    # compaction happened: the traces are smaller than the uncompacted ones …
    assert sizes.keys() == plain_sizes.keys()
    assert sum(sizes.values()) < sum(plain_sizes.values()) / 2
    assert sizes["__ivm_rel_orders"] < plain_sizes["__ivm_rel_orders"]
    # … and mean the same
    for name in ("orders", "customers", *VIEWS):
        assert rows(compacted.read(name)) == rows(plain.read(name))
    for view, sql in RECOMPUTE.items():
        assert rows(compacted.read(view)) == Counter(compacted._con.execute(sql).fetchall())
    assert compacted.epoch == plain.epoch == len(batches)


def test_direct_compaction_of_every_trace_keeps_views(monkeypatch):
    batches = workload(40, seed=11)
    db = ivm.connect()
    db.execute(DDL)
    for batch in batches[:25]:
        db.ingest(batch)
    before = {name: rows(db.read(name)) for name in ("orders", "customers", *VIEWS)}
    for table in trace_sizes(db):
        compact(db._con, f'"{table}"', ())
    assert {name: rows(db.read(name)) for name in ("orders", "customers", *VIEWS)} == before
    # maintenance continues correctly over compacted state
    for batch in batches[25:]:
        db.ingest(batch)
    for view, sql in RECOMPUTE.items():
        assert rows(db.read(view)) == Counter(db._con.execute(sql).fetchall())


def test_compaction_with_persistent_state(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 8)
    batches = workload(45, seed=3)
    state = tmp_path / "state"
    for start in range(0, len(batches), 15):
        with ivm.connect(state) as db:
            if start == 0:
                db.execute(DDL)
            for batch in batches[start : start + 15]:
                db.ingest(batch)
    with ivm.connect(state) as db:
        assert db.epoch == len(batches)
        for view, sql in RECOMPUTE.items():
            assert rows(db.read(view)) == Counter(db._con.execute(sql).fetchall())


def _compactions(monkeypatch) -> list[str]:
    """The traces compacted from now on, in order (compaction itself unchanged)."""
    compacted: list[str] = []
    real = traces.compact

    def counted(con, table, key):
        compacted.append(table)
        return real(con, table, key)

    monkeypatch.setattr(traces, "compact", counted)
    return compacted


def test_a_table_loaded_in_epochs_of_inserts_is_not_compacted_until_rows_are_deleted(
    monkeypatch,
):
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 8)
    compacted = _compactions(monkeypatch)
    db = ivm.connect()
    db.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, amount BIGINT)")
    trace = db._names.relation_trace("orders")
    for part in range(10):  # each epoch's tail is as large as all before it
        db.ingest({"orders": [{"id": part * 20 + i, "amount": i} for i in range(20)]})
    assert trace not in compacted
    db.ingest({"orders": [{"id": i, "amount": i % 20, "__w": -1} for i in range(10)]})
    assert trace not in compacted  # 20 rows to drop of 200: not half the first epoch's 20
    db.ingest({"orders": [{"id": i, "amount": i % 20, "__w": -1} for i in range(10, 40)]})
    assert compacted == [trace]  # 40 deletes: 80 rows of 200 go, half the 120 left
    assert trace_sizes(db)[trace.strip('"')] == 160
    assert rows(db.read("orders")) == Counter((i, i % 20) for i in range(40, 200))


@pytest.mark.parametrize("filled_by", ["create", "recompute"])
def test_a_backfilled_trace_is_a_base_not_a_tail(monkeypatch, filled_by):
    # A view's state filled at CREATE VIEW (or again when an epoch recomputes the view)
    # is compacted only when later appends reach half of it: not rewritten whole once
    # the next few epochs add 5k rows.
    compacted = _compactions(monkeypatch)
    db = ivm.connect()
    try:
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g BIGINT, v DOUBLE)")
        n = 40_000

        def rows_of(ids: range) -> pa.Table:
            return pa.table({"id": ids, "g": [i % 100 for i in ids],
                             "v": [float(i) for i in ids]})

        db.ingest("t", rows_of(range(n)))
        sql = "SELECT g, MAX(v) AS top, SUM(v) AS s FROM t GROUP BY g"
        db.execute(f"CREATE VIEW m AS {sql}")
        if filled_by == "recompute":  # 20k new rows of 40k: the view is computed again
            db.recompute_fraction = 0.1
            db.ingest("t", rows_of(range(10 * n, 10 * n + n // 2)))
            assert "recompute" in db.explain("m", analyze=True)
            db.recompute_fraction = None
        for epoch in range(8):  # 8k rows in all: over the 5k minimum, under half of 40k
            db.ingest("t", rows_of(range(n + epoch * 1000, n + (epoch + 1) * 1000)))
        assert [t for t in compacted if "#input" in t] == []
        assert rows(db.read("m")) == Counter(db._con.execute(sql).fetchall())
    finally:
        db.close()


def test_freeing_blocks_waits_for_a_later_checkpoint_while_another_cursor_writes(tmp_path):
    # The compaction has committed; its CHECKPOINT only frees blocks, and another
    # cursor's open write transaction (a reader's thread) must not make it an error.
    con = duckdb.connect(str(tmp_path / "state.duckdb"))
    con.execute("CREATE TABLE t (v BIGINT)")
    other = con.cursor()
    other.execute("BEGIN TRANSACTION")
    other.execute("INSERT INTO t VALUES (1)")
    con.execute("CREATE OR REPLACE TABLE c AS SELECT * FROM range(1000)")  # compacted
    traces.release_blocks(con)  # CHECKPOINT: "other write transactions active"
    other.execute("COMMIT")
    traces.release_blocks(con)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.close()
