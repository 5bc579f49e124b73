"""The session a user holds: DDL, ingest, reads, explain (the API.md contract, embedded mode).

One DuckDB database holds everything: base-table traces, view output traces,
operator state, the catalog and the epoch. Each ``ingest`` is one transaction:
the batch is validated, every affected view computes its change from the
change alone, state is appended, the epoch advances, and only then does the
transaction commit. Any error rolls all of it back.

Base tables and views are also DuckDB views under their own names (each live
row repeated by its weight), so ``sql()`` reads them as ordinary relations.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from ivm.sql_frontend.planner import plan_query
from ivm.sql_frontend.statements import CreateTable, CreateView, Drop, parse_script
from ivm.storage.catalog import Catalog, CatalogError
from ivm.storage.naming import TableNames
from ivm.storage.results import fetch_first
from ivm.storage.traces import Compactor, create_reader, create_trace
from ivm.views.batches import normalize_batch
from ivm.views.table_codec import table_from_json, table_to_json
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.errors import ExecutionError, IvmError, SchemaError, SqlError, StateError
from ivm.execution.constraints import check_change, upsert_sql
from ivm.execution.embedded import EpochRunner, describe, run_sql
from ivm.plan.nodes import Plan
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import Schema, TableSchema, quote

STATE_FILE = "ivm.duckdb"

_OPEN_STATES: set[Path] = set()
"""State files held by a live session of this process (DuckDB would share them silently)."""


@dataclass(frozen=True)
class ViewDef:
    """A maintained view: its SQL, circuit and output schema."""

    name: str
    sql: str
    circuit: Circuit
    schema: Schema

    @property
    def sources(self) -> frozenset[str]:
        """Tables and views the view reads directly."""
        return frozenset(self.circuit.sources())


def connect(path: str | os.PathLike[str] | None = None, **options: Any) -> Session:
    """Open a session (API.md): in memory, or persistent state in directory ``path``.

    With ``spark=`` (a SparkSession) the state is kept as DuckDB files per
    partition under ``path`` and every epoch runs on Spark (``ivm.views.spark.session``);
    ``partitions=`` fixes the partition count when the state is created.
    """
    unknown = set(options) - {"spark", "partitions"}
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
    if options.get("spark") is not None:
        from ivm.views.spark.session import SparkModeSession  # imports pyspark: only when asked for

        return SparkModeSession(path, options["spark"], options.get("partitions"))
    if options.get("partitions") is not None:
        raise IvmError("partitions= applies to Spark mode only: pass spark= as well")
    return Session(path)


class Session:
    """An ivm database: tables, views, and the epoch they are at."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._state_file = self._claim(self.path)
        self._closed = False
        try:
            self.con = self._open(self._state_file)
        except BaseException:
            self._release()
            raise
        self.names = TableNames()
        self.compactor = Compactor()
        self.tables: dict[str, TableSchema] = {}
        self.arrow_schemas: dict[str, pa.Schema] = {}
        self.views: dict[str, ViewDef] = {}
        self._no_change: dict[str, pa.Table] = {}  # each view's empty change, by name
        self.on_commit: list[Callable[[], None]] = []  # run after the open transaction commits
        self.on_rollback: list[Callable[[], None]] = []  # …or, in reverse, after it rolls back
        try:
            try:
                self.catalog = Catalog(self.con)
            except CatalogError as error:
                raise StateError(str(error)) from error
            self._check_mode()
            self._load()
        except IvmError:
            self.close()
            raise
        except duckdb.Error as error:
            self.close()
            raise StateError(f"state at {self.path} is unusable: {error}") from error

    @staticmethod
    def _claim(path: Path | None) -> Path | None:
        """The state file for ``path``, refused if another session of this process holds it."""
        if path is None:
            return None
        file = (path if path.suffix == ".duckdb" else path / STATE_FILE).resolve()
        if file in _OPEN_STATES:
            raise StateError(f"state at {path} is already open in this process: close it first")
        _OPEN_STATES.add(file)
        return file

    def _release(self) -> None:
        if self._state_file is not None:
            _OPEN_STATES.discard(self._state_file)

    @staticmethod
    def _open(file: Path | None) -> duckdb.DuckDBPyConnection:
        if file is None:
            return duckdb.connect()
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            return duckdb.connect(str(file))
        except (OSError, duckdb.Error) as error:
            raise StateError(f"cannot open state at {file}: {error}") from error

    def _check_open(self) -> None:
        if self._closed:
            raise StateError("this session is closed: open a new one with ivm.connect()")

    def _check_mode(self) -> None:
        """Refuse state kept by Spark mode: its contents are not in this database."""
        if self.catalog.mode() is not None:
            raise StateError(
                f"state at {self.path} was created in Spark mode: "
                "open it with ivm.connect(path, spark=spark)"
            )

    def _load(self) -> None:
        for kind, name, definition in self.catalog.entries():
            if kind == "table":
                self._register_table(table_from_json(name, definition))
            else:
                try:
                    self._register_view(name, definition)
                except IvmError as error:
                    raise StateError(f"stored view {name!r} cannot be planned: {error}") from error
        self._check_state_present()

    def _check_state_present(self) -> None:
        """Every trace the catalog implies must exist, or the state is unusable."""
        present = {
            r[0] for r in self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
        expected = [self.names.relation_trace(n) for n in [*self.tables, *self.views]]
        for view in self.views.values():
            expected += [
                self.names.operator_trace(view.name, op.index)
                for op in view.circuit.operators
                if op.stateful
            ]
        missing = [t for t in expected if t[1:-1].replace('""', '"') not in present]
        if missing:
            raise StateError(f"state at {self.path} is missing trace table(s) {', '.join(missing)}")

    # -- public API --------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The last epoch applied (0 before any ingest)."""
        return self.catalog.epoch

    def execute(self, sql: str) -> None:
        """Run DDL: CREATE TABLE, CREATE [MATERIALIZED] VIEW, DROP VIEW, DROP TABLE.

        A script of several statements is applied atomically: if one fails, none applies.
        """
        self._check_open()
        statements = parse_script(sql)
        with self._transaction():  # the whole script, or nothing
            for statement in statements:
                if isinstance(statement, CreateTable):
                    self._create_table(statement)
                elif isinstance(statement, CreateView):
                    self._create_view(statement)
                else:
                    self._drop(statement)

    def ingest(
        self,
        table: str | Mapping[str, Any],
        batch: Any = None,
        mode: str = "insert",
    ) -> dict[str, pa.Table]:
        """Apply one epoch of changes; returns every view's change (a consolidated Z-set)."""
        changes = self._prepared(table, batch, mode)
        with self._transaction(ExecutionError):
            deltas = self._apply(changes, upsert=mode == "upsert")
            run_sql(self.con, self.catalog.advance_sql())
        self.catalog.epoch += 1
        result = {name: self._fetch_change(name, deltas) for name in self.views}
        self._compact()
        return result

    def read(self, name: str) -> pa.Table:
        """Current contents of a view (or table): one row per copy."""
        self._check_open()
        name = self._resolve(name)
        if name not in self.views and name not in self.tables:
            raise SqlError(f"no table or view named {name!r}")
        return self.con.sql(f"SELECT * FROM {quote(name)}").to_arrow_table()

    def sql(self, query: str) -> pa.Table:
        """Run a read-only query over tables and views."""
        self._check_open()
        check_read_query(query)
        try:
            return self.con.sql(query).to_arrow_table()
        except duckdb.Error as error:
            raise SqlError(f"query failed: {error}") from error

    def explain(self, view: str) -> str:
        """The incremental circuit of ``view``, one operator per line."""
        self._check_open()
        view = self._resolve(view)
        if view not in self.views:
            raise SqlError(f"no view named {view!r}")
        return self.views[view].circuit.explain()

    def close(self) -> None:
        """Close the session; persistent state stays on disk. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self.con.close()
            self._release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- DDL ---------------------------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        """The stored spelling of a table or view name (DuckDB names ignore case)."""
        if name in self.tables or name in self.views:
            return name
        for known in [*self.tables, *self.views]:
            if known.lower() == name.lower():
                return known
        return name

    def _check_new_name(self, name: str) -> None:
        lowered = {n.lower() for n in [*self.tables, *self.views]}
        if name.lower() in lowered:
            raise SqlError(f"a table or view named {name!r} already exists")

    def _create_table(self, statement: CreateTable) -> None:
        table = statement.table
        if statement.if_not_exists and self._resolve(table.name) in self.tables:
            return
        self._check_new_name(table.name)
        trace = self.names.relation_trace(table.name)
        try:
            create_trace(self.con, trace, _pairs(table.schema))
        except duckdb.Error as error:
            raise SqlError(f"CREATE TABLE {table.name}: {error}") from error
        # DuckDB's spelling of the types (TEXT → VARCHAR, INT → INTEGER…).
        actual = describe(self.con, f"SELECT * EXCLUDE ({W}) FROM {trace}")
        table = TableSchema(table.name, actual, table.primary_key, table.not_null)
        create_reader(self.con, table.name, trace, actual.names)
        self.catalog.add("table", table.name, table_to_json(table))
        self._register_table(table)

    def _register_table(self, table: TableSchema) -> None:
        trace = self.names.relation_trace(table.name)
        self.tables[table.name] = table
        self.arrow_schemas[table.name] = (
            self.con.sql(f"SELECT * EXCLUDE ({W}) FROM {trace} LIMIT 0").to_arrow_table().schema
        )

    def _create_view(self, statement: CreateView) -> None:
        name = statement.name
        if name in self.views and statement.if_not_exists:
            return
        if name in self.views and statement.or_replace:
            self._drop(Drop("VIEW", name))
        self._check_new_name(name)
        view = self._register_view(name, statement.sql)
        trace = self.names.relation_trace(name)
        create_trace(self.con, trace, _pairs(view.schema))
        runner = EpochRunner(self.con, self.names, {}, backfill=True)
        delta = runner.run(view.circuit)
        for table, rows in runner.commits:
            run_sql(self.con, f"INSERT INTO {table} {rows}")
        if delta is not None:
            run_sql(self.con, f"INSERT INTO {trace} {consolidate_sql(delta, view.schema.names)}")
        create_reader(self.con, name, trace, view.schema.names)
        self.catalog.add("view", name, statement.sql)

    def _register_view(self, name: str, sql: str) -> ViewDef:
        relations = {n: t.schema for n, t in self.tables.items()}
        relations.update({n: v.schema for n, v in self.views.items()})
        plan = plan_query(sql, relations, self._describe)
        view = ViewDef(name=name, sql=sql, circuit=self._circuit(plan, name), schema=plan.schema)
        self.views[name] = view
        return view

    def _circuit(self, plan: Plan, name: str) -> Circuit:
        """The incremental circuit this session runs for a view's plan."""
        return incrementalize(plan, name)

    def _describe(self, sql: str) -> Schema:
        try:
            return describe(self.con, sql)
        except duckdb.Error as error:
            raise SqlError(f"DuckDB rejects the query: {error}") from error

    def _drop(self, statement: Drop) -> None:
        name = self._resolve(statement.name)
        known = self.views if statement.kind == "VIEW" else self.tables
        if name not in known:
            if statement.if_exists:
                return
            raise SqlError(f"DROP {statement.kind}: no {statement.kind.lower()} named {name!r}")
        dependents = [v.name for v in self.views.values() if name in v.sources]
        if dependents:
            raise SqlError(
                f"cannot drop {name!r}: view(s) {', '.join(dependents)} read it; drop them first"
            )
        self.con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        self.con.execute(f"DROP TABLE IF EXISTS {self.names.relation_trace(name)}").fetchall()
        self.compactor.forget(self.names.relation_trace(name))
        if statement.kind == "VIEW":
            for op in self.views[name].circuit.operators:
                if op.stateful:
                    trace = self.names.operator_trace(name, op.index)
                    self.con.execute(f"DROP TABLE IF EXISTS {trace}").fetchall()
                    self.compactor.forget(trace)
            del self.views[name]
            self._no_change.pop(name, None)
        else:
            del self.tables[name]
            del self.arrow_schemas[name]
        self.catalog.remove(name)

    # -- ingest ------------------------------------------------------------------------------

    def _prepared(self, table: str | Mapping[str, Any], batch: Any, mode: str) -> dict[str, Any]:
        """The batches of one ``ingest`` call by table (stored spelling), each prepared."""
        self._check_open()
        if mode not in ("insert", "upsert"):
            raise IvmError(f"unknown ingest mode {mode!r}: use 'insert' or 'upsert'")
        batches = dict(table) if isinstance(table, Mapping) else {table: batch}
        prepared = {self._resolve(n): self._prepare(n, b) for n, b in batches.items()}
        if len(prepared) != len(batches):
            raise SchemaError("a table appears twice in one ingest (names ignore case)")
        return prepared

    def _prepare(self, name: str, batch: Any) -> Any:
        """One table's batch made ready to apply (here: a normalized Arrow Z-set)."""
        return self._normalize(name, batch)

    def _normalize(self, name: str, batch: Any) -> pa.Table:
        name = self._resolve(name)
        if name in self.views:
            raise SchemaError(f"{name!r} is a view: ingest changes into its base tables")
        if name not in self.tables:
            raise SchemaError(f"no table named {name!r}")
        return normalize_batch(batch, self.tables[name], self.arrow_schemas[name])

    def _apply(self, batches: dict[str, pa.Table], upsert: bool) -> dict[str, str]:
        """Validate and apply every change inside the open transaction; returns the
        scratch tables holding each changed view's consolidated change."""
        changes: dict[str, str] = {}
        commits: list[tuple[str, str]] = []  # (trace table, query of rows to append)
        for name, batch in batches.items():
            table = self.tables[name]
            trace = self.names.relation_trace(name)
            change = self.names.change(name)
            registered = f"__ivm_batch_{len(changes)}"
            self.con.register(registered, batch)
            try:
                source = consolidate_sql(f"SELECT * FROM {registered}", table.schema.names)
                if upsert and table.primary_key:
                    source = upsert_sql(table, source, trace)
                self.con.execute(f"CREATE OR REPLACE TEMP TABLE {change} AS {source}").fetchall()
            finally:
                self.con.unregister(registered)
            check_change(self.con, table, f"SELECT * FROM {change}", trace)
            changes[name] = f"SELECT * FROM {change}"
            commits.append((trace, f"SELECT * FROM {change}"))
        runner = EpochRunner(self.con, self.names, changes)
        changed_views: dict[str, str] = {}
        for view in self.views.values():
            if not view.sources & set(changes):
                continue
            delta = runner.run(view.circuit)
            if delta is None:
                continue
            scratch = self.names.change(view.name)
            run_sql(
                self.con,
                f"CREATE OR REPLACE TEMP TABLE {scratch} AS "
                f"{consolidate_sql(delta, view.schema.names)}",
            )
            changes[view.name] = f"SELECT * FROM {scratch}"
            changed_views[view.name] = scratch
            commits.append((self.names.relation_trace(view.name), f"SELECT * FROM {scratch}"))
        for table, rows in runner.commits + commits:
            self._append(table, rows)
        return changed_views

    def _append(self, table: str, rows: str) -> None:
        """Append ``rows`` to the trace ``table`` and record how many for compaction."""
        try:
            count = fetch_first(self.con, f"INSERT INTO {table} {rows}")
        except duckdb.Error as error:
            raise ExecutionError(f"appending to state failed: {error}") from error
        self.compactor.appended(table, int(count[0]) if count else 0)

    def _fetch_change(self, view: str, changed: dict[str, str]) -> pa.Table:
        if view in changed:
            return self.con.sql(f"SELECT * FROM {changed[view]}").to_arrow_table()
        if view not in self._no_change:
            names = self.views[view].schema.names
            trace = self.names.relation_trace(view)
            self._no_change[view] = self.con.sql(
                f"SELECT {column_list(names)}, {W} FROM {trace} LIMIT 0"
            ).to_arrow_table()
        return self._no_change[view]

    def _compact(self) -> None:
        keys: dict[str, tuple[str, ...]] = {}
        for table in self.tables.values():
            keys[self.names.relation_trace(table.name)] = table.primary_key
        for view in self.views.values():
            for op in view.circuit.operators:
                if op.state_key:
                    keys[self.names.operator_trace(view.name, op.index)] = op.state_key
        # Compaction changes no contents, and the epoch is already committed: a failure
        # here must not turn a successful ingest into an error. It is retried later.
        try:
            self.compactor.compact_due(self.con, keys)
        except duckdb.Error as error:
            warnings.warn(f"ivm: trace compaction failed, will retry: {error}", stacklevel=3)

    # -- transactions ------------------------------------------------------------------------

    def _transaction(self, error_class: type[IvmError] = SqlError) -> _Transaction:
        return _Transaction(self, error_class)


def check_read_query(query: str) -> None:
    """Raise SqlError unless ``query`` is one read-only query (SELECT / WITH / set operation)."""
    try:
        trees = sqlglot.parse(query, read="duckdb")
    except SqlglotError as error:
        raise SqlError(f"cannot parse query: {error}") from error
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise SqlError("sql() runs one read-only query (SELECT / WITH / set operation)")


def _pairs(schema: Schema) -> list[tuple[str, str]]:
    """(name, type) of each column, as storage takes them."""
    return [(c.name, c.type) for c in schema.columns]


def _run_all(actions: Iterable[Callable[[], None]]) -> None:
    """Run every action, even if an earlier one fails; then raise the first failure."""
    failures = []
    for action in actions:
        try:
            action()
        except Exception as error:  # noqa: BLE001 - each action must get its turn
            failures.append(error)
    if failures:
        raise failures[0]


class _Transaction:
    """BEGIN … COMMIT, or ROLLBACK on any error (and in-memory catalog restored)."""

    def __init__(self, session: Session, error_class: type[IvmError]) -> None:
        self.session = session
        self.error_class = error_class  # what a DuckDB error inside becomes

    def __enter__(self) -> None:
        s = self.session
        self.saved = (dict(s.tables), dict(s.arrow_schemas), dict(s.views))
        s.on_commit, s.on_rollback = [], []
        s.con.execute("BEGIN TRANSACTION").fetchall()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        s = self.session
        if kind is None:
            try:
                s.con.execute("COMMIT").fetchall()
            except duckdb.Error as commit_error:
                s.tables, s.arrow_schemas, s.views = self.saved
                _run_all(reversed(s.on_rollback))
                raise StateError(f"committing failed, nothing was applied: {commit_error}") from (
                    commit_error
                )
            _run_all(s.on_commit)
            return
        try:
            s.con.execute("ROLLBACK").fetchall()
        finally:
            s.tables, s.arrow_schemas, s.views = self.saved
            _run_all(reversed(s.on_rollback))
        if isinstance(error, duckdb.Error):
            raise self.error_class(f"DuckDB: {error}") from error


__all__ = ["Session", "ViewDef", "check_read_query", "connect"]
