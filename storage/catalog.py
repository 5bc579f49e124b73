"""The catalog: which tables and views exist, their definitions, manifests and the epoch.

Stored in the same DuckDB database as the traces, so a persistent session
reopens with everything it needs, and catalog changes commit atomically with
the state they describe.

Each view has a *manifest* (``storage.manifest``): the state it keeps, as the
engine that wrote it described it. A reopening session compares it with what
the engine plans today before any state is used.

The DuckDB settings a view's SQL evaluates under (``storage.settings``) are
recorded in their own table when the state is created, or when a version that
records them first opens older state.

Format 1 (no manifests) is upgraded in place to format 2 once the session has
accepted it (``upgrade``, in the transaction that rebuilds its views, which
have no manifest); a session that refuses it leaves it untouched.
"""

from __future__ import annotations

import hashlib
import json

import duckdb

from ivm import faults
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
SETTINGS = "__ivm_settings"
"""The DuckDB settings recorded with the state (``storage.settings``), one row each."""
MODE = "__ivm_mode"
"""Present only for Spark-mode state: the mode and the partition count fixed at creation."""


class Catalog:
    """Reads and writes ivm's bookkeeping tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        if META not in _tables(con):
            foreign = _user_objects(con)
            if foreign:
                raise CatalogError(
                    "the database holds objects but is not ivm state "
                    f"({', '.join(foreign[:5])}); ivm keeps its own state: "
                    "point ivm.connect at a new path"
                )
            self._create()
        row = fetch_first(con, f"SELECT format, epoch FROM {META}")
        self.upgraded_from: int | None = None
        if row is not None and row[0] in UPGRADABLE:
            self.upgraded_from = int(row[0])  # upgraded by ``upgrade``, once accepted
        elif row is None or row[0] != FORMAT_VERSION:
            raise CatalogError(
                f"state was written by another ivm format ({row[0] if row else 'none'}); "
                f"this version reads format {FORMAT_VERSION}"
            )
        self.epoch = int(row[1])

    def _create(self) -> None:
        """The bookkeeping tables of new state, in one transaction."""
        self.con.execute("BEGIN TRANSACTION").fetchall()
        try:
            self.con.execute(
                f"CREATE TABLE {META} (format INTEGER, epoch BIGINT, created BIGINT)"
            ).fetchall()
            self.con.execute(f"INSERT INTO {META} VALUES ({FORMAT_VERSION}, 0, 0)").fetchall()
            self.con.execute(
                f"CREATE TABLE {ENTRIES} "
                "(seq BIGINT, kind VARCHAR, name VARCHAR, definition VARCHAR)"
            ).fetchall()
            _create_manifests(self.con)
            self.con.execute("COMMIT").fetchall()
        except BaseException:
            self.con.execute("ROLLBACK").fetchall()
            raise

    def upgrade(self) -> None:
        """Bring state of an older format to this one (in the caller's transaction): a
        manifest table, and a creation counter that never goes back."""
        if self.upgraded_from is None:
            return
        _create_manifests(self.con)
        self.con.execute(f"ALTER TABLE {META} ADD COLUMN IF NOT EXISTS created BIGINT").fetchall()
        self.con.execute(
            f"UPDATE {META} SET format = {FORMAT_VERSION}, "
            f"created = (SELECT COALESCE(MAX(seq), 0) FROM {ENTRIES})"
        ).fetchall()

    def entries(self) -> list[tuple[str, str, str]]:
        """(kind, name, definition) of every table and view, in creation order."""
        rows = self.con.execute(f"SELECT kind, name, definition FROM {ENTRIES} ORDER BY seq")
        return [(r[0], r[1], r[2]) for r in rows.fetchall()]

    def signature(self) -> str:
        """A digest of everything the catalog records (format, epoch, creation counter,
        every entry and manifest): equal signatures, same tables, views and epoch."""
        parts = [self.con.execute(f"SELECT * FROM {META}").fetchall(),
                 self.con.execute(f"SELECT * FROM {ENTRIES} ORDER BY seq").fetchall()]
        tables = _tables(self.con)
        if MANIFESTS in tables:
            parts.append(self.con.execute(f"SELECT * FROM {MANIFESTS} ORDER BY name").fetchall())
        if SETTINGS in tables:
            parts.append(self.con.execute(f"SELECT * FROM {SETTINGS} ORDER BY name").fetchall())
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def add(self, kind: str, name: str, definition: str) -> None:
        """Record a new table (``definition``: its JSON schema) or view (its SQL), with a
        creation number never used before (not even by a dropped table or view)."""
        self.con.execute(f"UPDATE {META} SET created = created + 1").fetchall()
        self.con.execute(
            f"INSERT INTO {ENTRIES} SELECT created, ?, ?, ? FROM {META}",
            [kind, name, definition],
        ).fetchall()
        faults.reached("ddl.catalog")

    def sequence(self, name: str) -> int:
        """The creation number of table or view ``name`` (unique over the state's life)."""
        row = fetch_first(self.con, f"SELECT seq FROM {ENTRIES} WHERE name = ?", [name])
        if row is None:
            raise KeyError(name)
        return int(row[0])

    def remove(self, name: str) -> None:
        """Forget a dropped table or view (and its manifest)."""
        self.con.execute(f"DELETE FROM {ENTRIES} WHERE name = ?", [name]).fetchall()
        if MANIFESTS in _tables(self.con):
            self.con.execute(f"DELETE FROM {MANIFESTS} WHERE name = ?", [name]).fetchall()
        faults.reached("ddl.dropped")

    def manifest(self, name: str) -> Manifest | None:
        """The stored manifest of view ``name`` (None: none was written, format 1)."""
        if self.upgraded_from is not None and MANIFESTS not in _tables(self.con):
            return None
        row = fetch_first(self.con, f"SELECT manifest FROM {MANIFESTS} WHERE name = ?", [name])
        if row is None:
            return None
        try:
            return Manifest.from_json(str(row[0]))
        except (ValueError, KeyError, TypeError) as error:
            raise CatalogError(f"the manifest of view {name!r} is unreadable: {error}") from None

    def set_manifest(self, name: str, manifest: Manifest) -> None:
        """Record (or replace) the manifest of view ``name``."""
        self.con.execute(f"DELETE FROM {MANIFESTS} WHERE name = ?", [name]).fetchall()
        self.con.execute(
            f"INSERT INTO {MANIFESTS} VALUES (?, ?)", [name, manifest.to_json()]
        ).fetchall()
        faults.reached("ddl.manifest")

    def settings(self) -> dict[str, str] | None:
        """The DuckDB settings recorded with the state (None: none were, older state)."""
        if SETTINGS not in _tables(self.con):
            return None
        rows = self.con.execute(f"SELECT name, value FROM {SETTINGS} ORDER BY name").fetchall()
        return {str(name): str(value) for name, value in rows}

    def record_settings(self, settings: dict[str, str]) -> None:
        """Record ``settings`` with the state, in a transaction of its own (at open, before
        anything else is read or written)."""
        self.con.execute("BEGIN TRANSACTION").fetchall()
        try:
            self.con.execute(
                f"CREATE TABLE IF NOT EXISTS {SETTINGS} (name VARCHAR, value VARCHAR)"
            ).fetchall()
            self.con.execute(f"DELETE FROM {SETTINGS}").fetchall()
            for name, value in sorted(settings.items()):
                self.con.execute(f"INSERT INTO {SETTINGS} VALUES (?, ?)", [name, value]).fetchall()
            self.con.execute("COMMIT").fetchall()
        except BaseException:
            self.con.execute("ROLLBACK").fetchall()
            raise

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


def _user_objects(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tables, views, sequences and macros someone other than ivm put in the database."""
    found = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary "
        "UNION ALL SELECT sequence_name FROM duckdb_sequences() WHERE NOT temporary "
        "UNION ALL SELECT function_name FROM duckdb_functions() "
        "WHERE function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall()
    return sorted(str(r[0]) for r in found)


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()
    return {r[0] for r in rows}


def _create_manifests(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {MANIFESTS} (name VARCHAR, manifest VARCHAR)"
    ).fetchall()
