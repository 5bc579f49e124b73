"""``ivm run``: a pipeline's tables and views from a SQL file, and its CDC files applied.

The SQL file is the pipeline's wanted state: a table or view it defines that the state
lacks is created; a view whose SQL changed is replaced; one that is there with the same
SQL is left alone (a table that is there is kept as it is). All in one transaction.

Each CDC file is one epoch, applied in name order (by file name, then path). A file
belongs to the table its folder is named after (``cdc/orders/0001.parquet``) or whose
name starts its file name (``cdc/orders-0001.parquet``, ``orders.2.jsonl``; the longest
table name that matches). Parquet (``.parquet``), CSV (``.csv``) and JSON lines
(``.json``, ``.jsonl``, ``.ndjson``) are read by DuckDB, CSV and JSON with the types the
table declares for its columns, other columns' types inferred (``views.cdc_reading``: a
value that does not fit its column stops the run before the file applies); each may hold
plain rows, weighted rows (``__w``), Debezium envelopes (``op``, ``before``, ``after``) or
a Delta change feed (``_change_type``). A file with no rows (a CSV of its header alone)
is an epoch with no changes. A file is applied once: its path is recorded in the epoch's
own transaction (as a stream of ``views.streaming``), and a file already applied is
skipped, so ``ivm run`` may be run again as files arrive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ivm.errors import IvmError, SchemaError
from ivm.sql_frontend.statements import CreateTable, CreateView, parse_script
from ivm.views.cdc_reading import READERS, read_cdc
from ivm.views.progress import shown

if TYPE_CHECKING:
    from ivm.views.session import Session

def define(db: Session, sql: str) -> list[str]:
    """Create what the SQL file defines and the state lacks (see the module docstring);
    returns what was done, one line per table or view."""
    done = []
    statements = parse_script(sql)
    with shown(db, "creating tables and views (filling views)", None), db._transaction():
        for statement in statements:
            if isinstance(statement, CreateTable):
                name = db._resolve(statement.table.name)
                if name in db._tables:
                    continue
                db._create_table(statement)
                done.append(f"created table {statement.table.name}")
            elif isinstance(statement, CreateView):
                name = db._resolve(statement.name)
                existing = db._views.get(name)
                if existing is not None and existing.sql.strip() == statement.sql.strip():
                    continue
                db._create_view(dataclasses.replace(statement, or_replace=True))
                done.append(f"{'replaced' if existing else 'created'} view {statement.name}")
            else:
                raise IvmError(
                    "a pipeline's SQL file holds CREATE TABLE and CREATE VIEW statements only"
                )
    return done


def cdc_files(folder: Path, tables: list[str]) -> list[tuple[Path, str]]:
    """Every CDC file under ``folder`` with its table, in the order they apply."""
    if not folder.is_dir():
        raise IvmError(f"no CDC folder {folder}")
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix.lower() in READERS and not path.name.startswith("."):
            found.append((path, table_of(path, folder, tables)))
    return sorted(found, key=lambda item: (item[0].name, str(item[0])))


def table_of(path: Path, folder: Path, tables: list[str]) -> str:
    """The table a CDC file belongs to (see the module docstring)."""
    parent = path.parent.relative_to(folder).parts
    by_lower = {t.lower(): t for t in tables}
    if parent and parent[0].lower() in by_lower:
        return by_lower[parent[0].lower()]
    stem = path.name.lower()
    matches = [t for t in by_lower if stem.startswith(t) and stem[len(t):len(t) + 1] in "-_."]
    if not matches:
        raise SchemaError(
            f"CDC file {path}: no table is named by its folder or the start of its name "
            f"(tables: {', '.join(tables)})"
        )
    return by_lower[max(matches, key=len)]


def apply_files(
    db: Session, files: list[tuple[Path, str]], folder: Path,
    progress: Callable[[Path, str, str], None],
) -> Iterator[tuple[Path, str, int, int]]:
    """Apply each file not applied yet as one epoch; yields (path, table, epoch, rows),
    with epoch 0 for a file skipped (applied already; rows 0). ``progress(path, table,
    what)`` is told before each file."""
    reader = duckdb.connect()
    try:
        for path, table in files:
            stream = f"file:{path.relative_to(folder).as_posix()}"
            if db._streams.last_batch(stream) >= 0:
                progress(path, table, "skipped")
                yield path, table, 0, 0
                continue
            progress(path, table, "reading")
            read = read_cdc(reader, path, db._tables[table])
            progress(path, table, "applying")
            db._streams.pending = (stream, 0)
            try:
                # the command line's bar of files is the one drawn (one live display)
                db.ingest(table, read.relation, epoch=db.epoch + 1, progress=False)
            finally:
                db._streams.pending = None
            yield path, table, db.epoch, read.rows
    finally:
        reader.close()
