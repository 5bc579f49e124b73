"""A persistent session's in-memory indexes, saved when it closes and taken back when the
state is next opened (``ivm.storage.snapshots``); with them, DuckDB's answers to the
DESCRIBEs that planning the stored views asked at open, so the next open asks none.

What is saved: each base table's ``RowIndex`` and every operator memory entry that can
say itself as arrays (``to_arrays``, see ``Run.memory``), such as an ASOF join's time
indexes. Taken back, a row index is ready at once; an operator's entry waits as a
``SavedMemory`` for its operator to take it back in its own terms. Without a snapshot
(the first open, after a session that did not close, another version of ivm or DuckDB)
everything is built from the traces at first use, as before. Beside them, in the catalog
database, every trace's compaction tail (``Compactor.save``), so that a trace gaining a
few rows per session is compacted once its tail over many sessions is due.
"""

from __future__ import annotations

import json
import warnings
from importlib import metadata
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from ivm.errors import IvmWarning, SqlError
from ivm.execution.embedded import describe
from ivm.execution.failures import duckdb_text
from ivm.execution.row_index import WRITABLE, RowIndex, hash_columns_sql
from ivm.operators.base import STATE_FORMAT, Savable, SavedMemory
from ivm.operators.time_index import TIME_CODE_TYPES, time_code_sql
from ivm.schema import Column, Schema
from ivm.storage.snapshots import save_snapshot, snapshot_dir, take_snapshot

if TYPE_CHECKING:
    from ivm.views.session import Session

TABLE, OPERATOR = "table", "operator"
"""The kinds of saved entry: a base table's row index, an operator's memory entry."""
DESCRIBED = "described"
"""The note holding DuckDB's DESCRIBE answers from planning the stored views."""


class SavedIndexes:
    """Saving and taking back one session's indexes (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def take(self) -> None:
        """Take back the snapshot the last session saved, if it still describes the state
        (after the catalog is loaded, before anything changes it)."""
        s = self.session
        if not s._engine.saves_indexes or s._state_file is None:
            return
        s._compactor.load(s._con)  # the traces' tails: compaction counts across sessions
        taken = take_snapshot(snapshot_dir(s._state_file), self.stamp())
        for name, arrays in taken.entries.items():
            kind, owner, entry = _parsed(name)
            if kind == TABLE and owner in s._tables:
                try:
                    s._row_indexes[owner] = RowIndex.from_arrays(arrays)
                except (KeyError, ValueError, IndexError):
                    continue  # built from the trace at first use instead
            elif kind == OPERATOR:  # kept if its view is still there once loaded
                s._operator_memory.setdefault(owner, {})[entry] = SavedMemory(arrays)
        s._described.update(_schemas(taken.notes.get(DESCRIBED)))

    def forget_unknown_views(self) -> None:
        """Drop what was taken back for operators of views that are not there."""
        s = self.session
        for key in [k for k in s._operator_memory if k[0] not in s._views]:
            del s._operator_memory[key]

    def save(self) -> None:
        """Save the indexes for the next open (before the connection closes)."""
        s = self.session
        if not s._engine.saves_indexes or s._state_file is None:
            return
        s._compactor.save(s._con)
        directory = snapshot_dir(s._state_file)
        entries: dict[str, dict[str, np.ndarray]] = {}
        writable: dict[str, frozenset[str]] = {}
        for table, index in s._row_indexes.items():
            name = json.dumps([TABLE, table, ""])
            entries[name], writable[name] = index.to_arrays(), WRITABLE
        for (view, fingerprint), memory in s._operator_memory.items():
            for entry, value in memory.items():
                arrays = _arrays_of(value)
                if arrays is not None:
                    entries[json.dumps([OPERATOR, [view, fingerprint], entry])] = arrays
        try:
            described = {sql: [[c.name, c.type] for c in schema.columns]
                         for sql, schema in s._described.items()}
            save_snapshot(directory, self.stamp(), entries, writable, {DESCRIBED: described})
        except (OSError, duckdb.Error) as error:  # the next open builds the indexes from the traces
            warnings.warn(f"ivm: could not save in-memory indexes: {error}", IvmWarning,
                          stacklevel=3)

    def describe(self, sql: str) -> Schema:
        """The schema DuckDB gives ``sql``. While the stored views are planned at open
        (≈20 questions a view, ≈1.6 ms each) the answers are kept, and saved at close for
        the next open, which asks only what they lack: the tables are those of the state
        the snapshot was stamped with."""
        s = self.session
        known = s._described.get(sql) if s._opening else None
        if known is not None:
            return known
        try:
            schema = describe(s._con, sql)
        except duckdb.Error as error:
            raise SqlError(f"DuckDB rejects the query: {duckdb_text(error)}") from error
        if s._opening:
            s._described[sql] = schema
        return schema

    def stamp(self) -> str:
        """What a snapshot must have been saved under to be taken back: the catalog's
        signature, and what computed the arrays: the versions, and the SQL of the row
        hashes and time codes (so that changing them changes the stamp)."""
        s = self.session
        hashes = [hash_columns_sql(t) for _, t in sorted(s._tables.items())]
        codes = [time_code_sql("t", type_) for type_ in TIME_CODE_TYPES]
        return json.dumps([s._catalog.signature(), duckdb.__version__, _ivm_version(),
                           STATE_FORMAT, hashes, codes])


def _schemas(saved: Any) -> dict[str, Schema]:
    """The DESCRIBE answers saved as notes (nothing if they are not as saved)."""
    if not isinstance(saved, dict):
        return {}
    try:
        return {str(sql): Schema(tuple(Column(str(n), str(t)) for n, t in columns))
                for sql, columns in saved.items()}
    except (TypeError, ValueError):
        return {}


def _ivm_version() -> str:
    try:
        return metadata.version("ivm")
    except metadata.PackageNotFoundError:
        return "unknown"


def _arrays_of(value: Any) -> dict[str, np.ndarray] | None:
    if isinstance(value, SavedMemory):  # never taken back this session: still as saved
        return dict(value.arrays)
    return value.to_arrays() if isinstance(value, Savable) else None


def _parsed(name: str) -> tuple[str, Any, str]:
    """(kind, owner, entry) of a saved entry's name: owner a table name or (view,
    fingerprint); ("", None, "") if unreadable."""
    try:
        kind, owner, entry = json.loads(name)
    except (ValueError, TypeError):
        return "", None, ""
    if kind == OPERATOR:
        if not (isinstance(owner, list) and len(owner) == 2):
            return "", None, ""
        return kind, (str(owner[0]), str(owner[1])), str(entry)
    return str(kind), str(owner), str(entry)
