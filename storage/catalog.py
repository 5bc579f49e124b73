"""The catalog: which tables and views exist, their definitions, manifests and the epoch.

Stored in the same DuckDB database as the traces, so a persistent session
reopens with everything it needs, and catalog changes commit atomically with
the state they describe.

Each view has a *manifest* (``storage.manifest``): the state it keeps, as the
engine that wrote it described it. A reopening session compares it with what
the engine plans today before any state is used.

Format 1 (no manifests) is upgraded in place to format 2: its views have no
manifest, so the session rebuilds them from their inputs.
"""

from __future__ import annotations

import duckdb

from ivm.storage.manifest import Manifest
from ivm.storage.results import fetch_first


class CatalogError(Exception):
    """The stored catalog cannot be read by this version."""


FORMAT_VERSION = 2
UPGRADABLE = frozenset({1})
"""Older formats this version upgrades in place (their views are rebuilt)."""
META = "__ivm_meta"
ENTRIES = "__ivm_catalog"
MANIFESTS = "__ivm_manifest"
MODE = "__ivm_mode"
"""Present only for Spark-mode state: the mode and the partition count fixed at creation."""


class Catalog:
    """Reads and writes ivm's bookkeeping tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        present = _tables(con)
        if META not in present:
            if present:
                raise CatalogError(
                    "the database holds tables but is not ivm state "
                    f"({', '.join(sorted(present)[:5])}…); ivm keeps its own state: "
                    "point ivm.connect at a new path"
                )
            con.execute(f"CREATE TABLE {META} (format INTEGER, epoch BIGINT)").fetchall()
            con.execute(f"INSERT INTO {META} VALUES ({FORMAT_VERSION}, 0)").fetchall()
            con.execute(
                f"CREATE TABLE {ENTRIES} "
                "(seq BIGINT, kind VARCHAR, name VARCHAR, definition VARCHAR)"
            ).fetchall()
            _create_manifests(con)
        row = fetch_first(con, f"SELECT format, epoch FROM {META}")
        self.upgraded_from: int | None = None
        if row is not None and row[0] in UPGRADABLE:
            self.upgraded_from = int(row[0])
            _create_manifests(con)
            con.execute(f"UPDATE {META} SET format = {FORMAT_VERSION}").fetchall()
        elif row is None or row[0] != FORMAT_VERSION:
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
        """Forget a dropped table or view (and its manifest)."""
        self.con.execute(f"DELETE FROM {ENTRIES} WHERE name = ?", [name]).fetchall()
        self.con.execute(f"DELETE FROM {MANIFESTS} WHERE name = ?", [name]).fetchall()

    def manifest(self, name: str) -> Manifest | None:
        """The stored manifest of view ``name`` (None: none was written, format 1)."""
        row = fetch_first(self.con, f"SELECT manifest FROM {MANIFESTS} WHERE name = ?", [name])
        return Manifest.from_json(str(row[0])) if row else None

    def set_manifest(self, name: str, manifest: Manifest) -> None:
        """Record (or replace) the manifest of view ``name``."""
        self.con.execute(f"DELETE FROM {MANIFESTS} WHERE name = ?", [name]).fetchall()
        self.con.execute(
            f"INSERT INTO {MANIFESTS} VALUES (?, ?)", [name, manifest.to_json()]
        ).fetchall()

    def mode(self) -> tuple[str, int] | None:
        """("spark", partitions) for Spark-mode state; None for embedded state."""
        if MODE not in _tables(self.con):
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


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()
    return {r[0] for r in rows}


def _create_manifests(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {MANIFESTS} (name VARCHAR, manifest VARCHAR)"
    ).fetchall()
