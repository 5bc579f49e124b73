"""Batches as users hold them (issue #27, item 9): a dict of columns, Polars DataFrames,
DuckDB relations, Arrow record batch readers streamed in chunks (one epoch, with progress)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.settings import RANDOM_CDC, examples

import ivm
from ivm.views import loading

DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, s VARCHAR);
    CREATE VIEW v AS SELECT s, COUNT(*) AS n FROM t GROUP BY s;
"""


def rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.fixture
def db() -> Any:
    session = ivm.connect()
    session.execute(DDL)
    yield session
    session.close()


def test_every_kind_of_batch(db: Any) -> None:
    polars = pytest.importorskip("polars")
    db.ingest("t", {"id": [1, 2], "s": ["a", "b"]})
    db.ingest("t", polars.DataFrame({"id": [3], "s": ["a"]}))
    db.ingest("t", duckdb.sql("SELECT 4::BIGINT AS id, 'c' AS s"))
    db.ingest("t", pa.table({"id": [5], "s": ["c"]}).to_reader())
    db.ingest({"t": {"id": [1], "s": ["a"], "__w": [-1]}})
    assert db.epoch == 5
    assert rows(db.read("v")) == [("a", 1), ("b", 1), ("c", 2)]
    with pytest.raises(ivm.SchemaError, match="dict of columns"):
        db.ingest("t", {"id": [6, 7], "s": ["x"]})
    with pytest.raises(ivm.SchemaError, match="Polars DataFrame, a DuckDB relation"):
        db.ingest("t", 42)


def test_a_reader_streams_in_chunks_as_one_epoch(db: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(loading, "CHUNK_ROWS", 3)
    applied: list[int] = []
    apply = type(db)._apply

    def spy(self: Any, changes: Any, upsert: bool) -> Any:
        applied.append(sum(c.num_rows for c in changes.values()))
        return apply(self, changes, upsert)

    monkeypatch.setattr(type(db), "_apply", spy)
    batches = [pa.record_batch({"id": [i, i + 1], "s": ["a", "b"]}) for i in range(0, 10, 2)]
    batches.append(pa.record_batch({"id": [0, 10], "s": ["a", "z"], "__w": [-1, 1]}))
    weighted = pa.schema([("id", pa.int64()), ("s", pa.string()), ("__w", pa.int64())])
    batches = [b.append_column("__w", pa.array([1] * 2)) if "__w" not in b.schema.names else b
               for b in batches]
    delta = db.ingest("t", pa.RecordBatchReader.from_batches(weighted, batches))
    assert applied == [4, 4, 4]  # three chunks; the last deletes a row the first inserted
    assert db.epoch == 1
    assert rows(delta["v"]) == [("a", 4, 1), ("b", 5, 1), ("z", 1, 1)]
    assert rows(db.read("v")) == rows(db.sql("SELECT s, COUNT(*) AS n FROM t GROUP BY s"))


def test_a_failing_chunk_applies_nothing(db: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(loading, "CHUNK_ROWS", 2)
    db.ingest("t", {"id": [100], "s": ["q"]})
    relation = duckdb.sql("SELECT range AS id, 'r' AS s FROM range(7) UNION ALL "
                          "SELECT 100, 'dup'")  # the key 100 is there: refused in the last chunk
    with pytest.raises(ivm.ConstraintError, match="duplicate primary key"):
        db.ingest("t", relation)
    assert db.epoch == 1 and rows(db.read("t")) == [(100, "q")]
    assert db.ingest("t", pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
                     .to_reader())["v"].num_rows == 0
    assert db.epoch == 1  # an empty stream is a no-op


def test_progress_bar_on_a_large_load(db: Any, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setattr(loading, "CHUNK_ROWS", 1000)
    table = duckdb.sql("SELECT range AS id, (range % 7)::VARCHAR AS s FROM range(5000)")
    db.ingest("t", table.to_arrow_table(), progress=True)
    assert "loading t" in capsys.readouterr().err
    assert db.epoch == 1 and sum(r["n"] for r in db.read("v").to_pylist()) == 5000


def test_batch_kinds_on_spark(spark: Any, tmp_path: Path) -> None:
    polars = pytest.importorskip("polars")
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        db.ingest("t", {"id": [1, 2], "s": ["a", "b"]})
        db.ingest("t", pa.table({"id": [3], "s": ["a"]}).to_reader())
        db.ingest("t", duckdb.sql("SELECT 4::BIGINT AS id, 'c' AS s"))
        db.ingest("t", polars.DataFrame({"id": [5, 1], "s": ["c", "a"], "__w": [1, -1]}))
        assert db.epoch == 4
        assert rows(db.read("t")) == [(2, "b"), (3, "a"), (4, "c"), (5, "c")]
        assert rows(db.read("v")) == rows(db.sql("SELECT s, COUNT(*) AS n FROM t GROUP BY s"))
        assert rows(db.read("v")) == [("a", 1), ("b", 1), ("c", 2)]
        with pytest.raises(ivm.SchemaError, match="Polars DataFrame, a DuckDB relation"):
            db.ingest("t", 42)
    finally:
        db.close()


STREAM_DDL = """
    CREATE TABLE e (id BIGINT, k BIGINT, v BIGINT);
    CREATE VIEW agg AS SELECT k, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, COUNT(*) AS n
        FROM e GROUP BY k;
    CREATE VIEW pairs AS SELECT a.id, b.id AS other FROM e AS a JOIN e AS b ON a.k = b.k
        WHERE a.v < b.v;
    CREATE VIEW ranked AS SELECT id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v, id) AS r
        FROM e;
"""


@settings(RANDOM_CDC, max_examples=examples(6))
@given(epochs=st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2),
                                          st.integers(0, 9), st.booleans()), max_size=9),
                       min_size=1, max_size=4))
def test_random_streamed_epochs_equal_recomputation(epochs: list[list[tuple]]) -> None:
    """Each epoch streamed in chunks of 2 rows (deletes of rows earlier chunks inserted
    included), every view equal to its recomputation after every epoch."""
    db = ivm.connect()
    db.execute(STREAM_DDL)
    live: list[tuple[int, int, int]] = []
    saved = loading.CHUNK_ROWS
    loading.CHUNK_ROWS = 2
    try:
        for changes in epochs:
            batch = []
            for i, k, v, delete in changes:
                if delete and live:
                    batch.append((*live.pop(i % len(live)), -1))
                else:
                    live.append((i, k, v))
                    batch.append((i, k, v, 1))
            names = ["id", "k", "v", "__w"]
            table = pa.table({n: [r[j] for r in batch] for j, n in enumerate(names)},
                             schema=pa.schema([(n, pa.int64()) for n in names]))
            db.ingest("e", table.to_reader(max_chunksize=1))
            for name, view in db.views.items():
                assert rows(db.read(name)) == rows(db.sql(view.sql)), name
    finally:
        loading.CHUNK_ROWS = saved
        db.close()


def test_a_stream_is_spooled_in_spark_mode(spark: Any, tmp_path: Path,
                                            monkeypatch: Any) -> None:
    """Spark mode spools a reader or relation to files a chunk at a time (chunks of 2 rows
    here): the views equal their recomputation, a delete of a row an earlier chunk
    inserted cancels it, and no spooled file outlives the ingest, committed or not."""
    from ivm.views.spark import spool

    written: list[int] = []
    original = spool.normalize_batch

    def counted(chunk: Any, *args: Any) -> Any:
        written.append(chunk.num_rows)
        return original(chunk, *args)

    monkeypatch.setattr(spool, "CHUNK_ROWS", 2)
    monkeypatch.setattr(spool, "normalize_batch", counted)
    with ivm.connect(tmp_path / "s", spark=spark, partitions=2) as db:
        db.execute(STREAM_DDL + "; CREATE TABLE keyed (id BIGINT PRIMARY KEY, v BIGINT)")
        names = ["id", "k", "v", "__w"]
        batch = pa.table({"id": [1, 2, 3, 4, 5, 1], "k": [1, 1, 2, 2, 3, 1],
                          "v": [5, 6, 7, 8, 9, 5], "__w": [1, 1, 1, 1, 1, -1]},
                         schema=pa.schema([(n, pa.int64()) for n in names]))
        db.ingest("e", batch.to_reader(max_chunksize=1))
        assert written == [2, 2, 2]  # three chunks, never the whole stream
        assert rows(db.read("e")) == [(2, 1, 6), (3, 2, 7), (4, 2, 8), (5, 3, 9)]
        relation = duckdb.sql("SELECT range AS id, range % 3 AS k, range AS v FROM range(10, 15)")
        db.ingest("e", relation)
        for name, view in db.views.items():
            assert rows(db.read(name)) == rows(db.sql(view.sql)), name
        db.ingest("keyed", pa.table({"id": [1], "v": [1]}))
        with pytest.raises(ivm.ConstraintError):
            db.ingest("keyed", pa.table({"id": [2, 1], "v": [2, 2]}).to_reader(max_chunksize=1))
        assert rows(db.read("keyed")) == [(1, 1)] and db.epoch == 3
        empty = pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.int64())})
        db.ingest("keyed", empty.to_reader())  # no rows: no epoch
        assert db.epoch == 3
        assert not list((tmp_path / "s" / "spool").glob("*"))
