"""A second reader (issue #27, item 12): ``db.serve()`` answers read-only SQL over Arrow
Flight, at the last committed epoch, while the session ingests; from another process too."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ivm
from ivm.views.serving import Reader

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
"""


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.fixture
def served(tmp_path: Path) -> Any:
    db = ivm.connect(tmp_path / "s")
    db.execute(DDL)
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}])
    server = db.serve()
    yield db, server
    db.close()


def test_a_reader_sees_the_last_committed_epoch_while_ingest_runs(served: Any) -> None:
    db, server = served
    seen: list[tuple[int, list[tuple]]] = []
    with Reader(server.location) as reader:
        assert reader.epoch == 1 and rows(reader.read("revenue")) == [("a", 5)]
        advance = type(db)._advance_epoch

        def mid_epoch(self: Any, changed: Any) -> None:  # inside the epoch's transaction
            advance(self, changed)
            seen.append((reader.epoch, rows(reader.read("revenue"))))

        type(db)._advance_epoch = mid_epoch
        try:
            db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}])
        finally:
            type(db)._advance_epoch = advance
        assert seen == [(1, [("a", 5)])]  # the epoch being applied is invisible
        assert reader.epoch == 2 and rows(reader.read("revenue")) == [("a", 12)]
        with pytest.raises(ivm.SqlError, match="read-only query"):
            reader.sql("DELETE FROM orders")
        with pytest.raises(ivm.SqlError, match="nope"):
            reader.sql("SELECT * FROM nope")
        with pytest.raises(ivm.SqlError, match="table function read_csv"):
            reader.sql("SELECT * FROM read_csv('/etc/passwd')")  # the server's files


def test_another_process_reads_the_views(served: Any) -> None:
    _, server = served
    code = (
        "from ivm.views.serving import Reader\n"
        f"r = Reader({server.location!r})\n"
        "print(r.epoch, r.sql('SELECT total::INT AS t FROM revenue').column(0).to_pylist())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "[5]"]


def test_serving_stops_at_close(tmp_path: Path) -> None:
    db = ivm.connect()
    db.execute(DDL)
    server = db.serve()
    db.close()
    with pytest.raises(ivm.IvmError):
        Reader(server.location).epoch  # noqa: B018 - the server is gone


def test_serving_in_spark_mode(tmp_path: Path, spark: Any) -> None:
    # A request reads the partition files on the driver; one sent while an epoch is in
    # flight is answered once it commits, with the epoch applied whole.
    db = ivm.connect(tmp_path / "sp", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}])
        server = db.serve()
        with Reader(server.location) as reader:
            assert reader.epoch == 1 and rows(reader.read("revenue")) == [("a", 5)]
            answers: list[list[tuple]] = []
            advance = type(db)._advance_epoch

            def mid_epoch(self: Any, changed: Any) -> None:
                advance(self, changed)
                asked = threading.Thread(
                    target=lambda: answers.append(rows(reader.read("revenue"))))
                asked.start()
                threads.append(asked)

            threads: list[threading.Thread] = []
            type(db)._advance_epoch = mid_epoch
            try:
                db.ingest("orders", [{"id": 2, "customer": "b", "amount": 7}])
            finally:
                type(db)._advance_epoch = advance
            threads[0].join(timeout=120)
            assert answers == [[("a", 5), ("b", 7)]]
            assert reader.epoch == 2
            assert rows(reader.sql("SELECT id, customer FROM orders")) == [(1, "a"), (2, "b")]
            with pytest.raises(ivm.SqlError, match="read-only query"):
                reader.sql("DELETE FROM orders")
            with pytest.raises(ivm.SqlError, match="table function read_csv"):
                reader.sql("SELECT * FROM read_csv('/etc/passwd')")
    finally:
        db.close()
