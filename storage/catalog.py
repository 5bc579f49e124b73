"""The catalog: which tables and views exist, their definitions, and the epoch.

Stored in the same DuckDB database as the traces, so a persistent session
reopens with everything it needs, and catalog changes commit atomically with
the state they describe.
"""

from __future__ import annotations

import duckdb
from ivm.storage.results import fetch_first


class CatalogError(Exception):
    """The stored catalog cannot be read by this version."""


FORMAT_VERSION = 1
META = "__ivm_meta"
ENTRIES = "__ivm_catalog"
MODE = "__ivm_mode"
"""Present only for Spark-mode state: the mode and the partition count fixed at creation."""


class Catalog:
    """Reads and writes ivm's bookkeeping tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if META not in present:
            con.execute(f"CREATE TABLE {META} (format INTEGER, epoch BIGINT)").fetchall()
            con.execute(f"INSERT INTO {META} VALUES ({FORMAT_VERSION}, 0)").fetchall()
            con.execute(
                f"CREATE TABLE {ENTRIES} "
                "(seq BIGINT, kind VARCHAR, name VARCHAR, definition VARCHAR)"
            ).fetchall()
        row = fetch_first(con, f"SELECT format, epoch FROM {META}")
        if row is None or row[0] != FORMAT_VERSION:
            raise CatalogError(
                f"state was written by another ivm format ({row[0] if row else 'none'}); "
                f"this version reads format {FORMAT_VERSION}"
            )
        self.epoch = int(row[1])

    def entries(self) -> list[tuple[str, str, str]]:
        """(kind, name, definition) of every table and view, in creation order."""
        rows = self.con.execute(f"SELECT kind, name, definition FROM {ENTRIES} ORDER BY seq")
        return [(r[0], r[1], r[2]) for r in rows.fetchall()]

    def add(self, kind: str, name: str, definition: str) -> None:
        """Record a new table (``definition``: its JSON schema) or view (its SQL)."""
        self.con.execute(
            f"INSERT INTO {ENTRIES} SELECT COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM {ENTRIES}",
            [kind, name, definition],
        ).fetchall()

    def sequence(self, name: str) -> int:
        """The creation number of table or view ``name`` (unique over the state's life)."""
        row = fetch_first(self.con, f"SELECT seq FROM {ENTRIES} WHERE name = ?", [name])
        if row is None:
            raise KeyError(name)
        return int(row[0])

    def remove(self, name: str) -> None:
        """Forget a dropped table or view."""
        self.con.execute(f"DELETE FROM {ENTRIES} WHERE name = ?", [name]).fetchall()

    def mode(self) -> tuple[str, int] | None:
        """("spark", partitions) for Spark-mode state; None for embedded state."""
        present = {
            r[0] for r in self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
        if MODE not in present:
            return None
        row = fetch_first(self.con, f"SELECT mode, partitions FROM {MODE}")
        return (str(row[0]), int(row[1])) if row else None

    def set_mode(self, mode: str, partitions: int) -> None:
        """Record that this state is kept in ``mode`` with ``partitions`` partitions."""
        self.con.execute(f"CREATE TABLE {MODE} (mode VARCHAR, partitions INTEGER)").fetchall()
        self.con.execute(f"INSERT INTO {MODE} VALUES (?, ?)", [mode, partitions]).fetchall()

    def advance_sql(self) -> str:
        """The statement that moves the stored epoch one step (run in the epoch's transaction)."""
        return f"UPDATE {META} SET epoch = epoch + 1"
