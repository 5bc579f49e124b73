"""State directories written by another tool (or another ivm), which ``ivm.connect`` must
refuse with ``StateError``, leaving every file as it was; shared by both modes' tests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import duckdb

import ivm


def files_under(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> digest)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def foreign_duckdb(state: Path) -> None:
    """A DuckDB file of someone else's tables where ivm keeps its catalog."""
    con = duckdb.connect(str(state / "ivm.duckdb"))
    con.execute("CREATE TABLE sales (id INTEGER); INSERT INTO sales VALUES (1)")
    con.close()


def other_format(state: Path) -> None:
    """An ivm state of a format this ivm does not know."""
    with ivm.connect(state) as db:
        db.execute("CREATE TABLE t (a INT)")
    con = duckdb.connect(str(state / "ivm.duckdb"))
    con.execute("UPDATE __ivm_meta SET format = 999")
    con.close()


def spark_layout(state: Path) -> None:
    """Spark mode's partition layout, but no catalog."""
    (state / "tables" / "t1-sales" / "table").mkdir(parents=True)
    (state / "tables" / "t1-sales" / "table" / "part-00000.duckdb").write_bytes(b"x" * 64)
    (state / "fence").write_text("someone else's")


def garbage(state: Path) -> None:
    """Bytes that are no database where the catalog should be."""
    (state / "ivm.duckdb").write_bytes(b"not a database\x00" * 100)


def saved_indexes_only(state: Path) -> None:
    """The folder of saved indexes, without a catalog."""
    (state / "ivm.duckdb.memory").mkdir()


WRITERS: dict[str, Callable[[Path], None]] = {
    "foreign-duckdb": foreign_duckdb, "other-ivm-format": other_format,
    "spark-layout-without-catalog": spark_layout, "garbage": garbage,
    "saved-indexes-without-catalog": saved_indexes_only,
}
"""Each way another tool may have written a state directory, by test id."""
