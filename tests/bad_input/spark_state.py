"""The shop in Spark mode, and what "nothing changed" means there beyond ``unchanged.py``:
every partition file the state had is still there, no file or directory was added, and
each file's stored epoch (``__ivm_partition``) is the one it had.

A partition file that was not written since the last look (same size and modification
time, to the nanosecond) has the epoch it had then: only files that changed are opened,
which keeps a check to a few milliseconds when nothing ran on Spark.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from bad_input.cases import SHOP, SHOP_ROWS, good_batch
from bad_input.unchanged import State, assert_unchanged, capture
from ivm.storage.partitions import META

SPARK_SHOP = SHOP.replace(
    "CREATE TABLE docs (id BIGINT PRIMARY KEY, meta STRUCT(src VARCHAR, n INTEGER));", ""
).replace(
    "CREATE VIEW sources AS SELECT meta.src AS src, SUM(meta.n) AS n FROM docs GROUP BY meta.src;",
    "CREATE VIEW sources AS SELECT s AS src, COUNT(*) AS n FROM events GROUP BY s;",
).replace(
    "CREATE VIEW event_counts AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM events GROUP BY k;",
    "",
)
"""The shop without ``docs``, whose STRUCT column Spark mode cannot carry (refused at its
CREATE TABLE); ``sources`` (which a DDL case drops) reads ``events`` instead; and without
``event_counts``, which no case names (each view costs every Spark epoch a stage)."""
assert "docs" not in SPARK_SHOP and "event_counts" not in SPARK_SHOP
assert "CREATE VIEW sources" in SPARK_SHOP

SPARK_ROWS = {name: rows for name, rows in SHOP_ROWS.items() if name != "docs"}


def spark_good_batch(n: int) -> dict[str, list[dict[str, Any]]]:
    """``good_batch`` without ``docs``."""
    return {name: rows for name, rows in good_batch(n).items() if name != "docs"}


VOLATILE = frozenset({"fence", "fence.next", "spool"})
"""Files every ingest attempt rewrites (the token of the attempt allowed to write), and the
folder of streams spooled by an ingest (each, ``spool/<id>``, removed as its ingest ends:
one left would count)."""

Stamp = tuple[int, int]  # (size, mtime_ns)


@dataclass(frozen=True)
class SparkState:
    """A Spark-mode session's observable state: ``unchanged.State``, every path under the
    state directory, and each partition file's stored epoch (with its stamp when read)."""

    state: State
    paths: frozenset[str]
    epochs: dict[str, tuple[Stamp, int]]


def _stamp(path: Path) -> Stamp:
    status = path.stat()
    return status.st_size, status.st_mtime_ns


NO_EPOCH = -2
"""What a partition file without epoch bookkeeping stores (none: not a partition yet)."""


def _stored_epoch(file: Path) -> int:
    con = duckdb.connect(str(file), read_only=True)
    try:
        if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = ?",
                           [META]).fetchall():
            return NO_EPOCH
        row = con.execute(f"SELECT epoch FROM {META}").fetchone()
    finally:
        con.close()
    assert row is not None, file
    return int(row[0])


def partition_epochs(root: Path, known: dict[str, tuple[Stamp, int]] | None = None
                     ) -> dict[str, tuple[Stamp, int]]:
    """Each partition file's stamp and stored epoch; a file whose stamp is as in ``known``
    is not opened."""
    found = {}
    for file in sorted(root.glob("*/*/*/part-*.duckdb")):
        name, stamp = str(file.relative_to(root)), _stamp(file)
        old = (known or {}).get(name)
        found[name] = old if old is not None and old[0] == stamp else (stamp, _stored_epoch(file))
    return found


def paths_under(root: Path) -> frozenset[str]:
    """Every file and directory under ``root`` (relative), but the ``VOLATILE`` ones."""
    return frozenset(str(p.relative_to(root)) for folder, dirs, files in os.walk(root)
                     for p in (Path(folder) / n for n in [*dirs, *files])
                     if p.name not in VOLATILE)


def capture_spark(db: Any, known: SparkState | None = None) -> SparkState:
    """``db``'s state now (its state directory's files read where they changed)."""
    root = Path(db.path)
    epochs = partition_epochs(root, known.epochs if known else None)
    return SparkState(capture(db), paths_under(root), epochs)


def assert_spark_unchanged(db: Any, before: SparkState) -> SparkState:
    """Fail unless ``db`` is as ``before``: tables, views, epoch, paths, stored epochs."""
    after = SparkState(assert_unchanged(db, before.state), paths_under(Path(db.path)),
                       partition_epochs(Path(db.path), before.epochs))
    added, removed = after.paths - before.paths, before.paths - after.paths
    assert not added and not removed, f"files added {sorted(added)}, removed {sorted(removed)}"
    moved = {name: (before.epochs[name][1], epoch) for name, (_, epoch) in after.epochs.items()
             if epoch != before.epochs[name][1]}
    assert not moved, f"stored epochs moved: {moved}"
    assert all(epoch <= db.epoch for _, epoch in after.epochs.values())
    return after
