"""DDL of a session: CREATE [OR REPLACE] TABLE / VIEW, DROP … [CASCADE].

Every statement runs inside the script's transaction (``Session.execute``), so
a script applies whole or not at all. Replacing a table or view, or dropping
one with CASCADE, touches the views that read it (directly or through other
views):

* ``CREATE OR REPLACE``: the dependents are dropped and created again from
  their own SQL over the new definition (a dependent that no longer plans
  fails the whole script); a replaced table starts empty, as in DuckDB;
* ``DROP … CASCADE``: the dependents are dropped first; without CASCADE a
  drop that others depend on is refused, naming them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import duckdb

from ivm.errors import IvmError, IvmWarning, SqlError
from ivm.execution.embedded import describe
from ivm.execution.failures import duckdb_text
from ivm.plan.sql import W
from ivm.schema import TableSchema
from ivm.sql_frontend.positions import TEXT_START, Origin
from ivm.sql_frontend.statements import (
    AlterTable,
    CreateTable,
    CreateView,
    Drop,
    Refresh,
    Statement,
)
from ivm.storage.traces import create_reader, create_trace
from ivm.views import relation_times
from ivm.views.altering import alter_table
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import ViewFailed
from ivm.views.join_plans import join_plan_for
from ivm.views.table_codec import table_to_json

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


class Ddl(_Base):
    """The DDL half of ``Session`` (see the module docstring)."""

    def _run_statement(self, statement: Statement) -> None:
        """Apply one statement of a DDL script (inside the script's transaction)."""
        if isinstance(statement, CreateTable):
            self._create_table(statement)
        elif isinstance(statement, CreateView):
            self._create_view(statement)
        elif isinstance(statement, AlterTable):
            alter_table(self, statement)
        elif isinstance(statement, Refresh):
            name = self._resolve(statement.name)
            if name not in self._views:
                raise SqlError(f"REFRESH MATERIALIZED VIEW: no view named {statement.name!r}")
            warnings.warn(
                f"ivm: REFRESH MATERIALIZED VIEW {name} does nothing: ivm keeps every view "
                "fresh, updated from each epoch's changes",
                IvmWarning, stacklevel=4,
            )
        else:
            self._drop(statement)

    def _create_table(self, statement: CreateTable) -> None:
        table = statement.table
        existing = self._resolve(table.name)
        if existing in self._tables and statement.if_not_exists:
            return
        if existing in self._tables and statement.or_replace:
            self._replace(existing, lambda: self._add_table(table))
            return
        self._check_new_name(table.name)
        self._add_table(table)

    def _create_view(self, statement: CreateView) -> None:
        origin = statement.origin  # errors point into the script the user passed
        existing = self._resolve(statement.name)
        if existing in self._views and statement.if_not_exists:
            return
        if existing in self._views and statement.or_replace:
            self._replace(existing, lambda: self._add_view(statement.name, statement.sql, origin))
            return
        self._check_new_name(statement.name)
        self._add_view(statement.name, statement.sql, origin)

    def _drop(self, statement: Drop) -> None:
        name = self._resolve(statement.name)
        known = self._views if statement.kind == "VIEW" else self._tables
        if name not in known:
            if statement.if_exists:
                return
            raise SqlError(f"DROP {statement.kind}: no {statement.kind.lower()} named {name!r}")
        dependents = self._dependents(name)
        if dependents and not statement.cascade:
            names = ", ".join(repr(d.name) for d in dependents)
            raise SqlError(
                f"cannot drop {name!r}: view(s) {names} read it; drop them first, "
                f"or DROP {statement.kind} {name} CASCADE to drop them too"
            )
        self._records.write_held(self._con, self._on_commit, self._on_rollback)
        for dependent in reversed(dependents):
            self._remove(dependent.name)
            relation_times.forget(self._con, dependent.name)  # its epochs' record goes too
        self._remove(name)
        relation_times.forget(self._con, name)

    def _replace(self, name: str, create: Callable[[], None]) -> None:
        """Drop ``name`` and its dependents, run ``create``, then create the dependents
        again from their SQL (in their creation order)."""
        dependents = self._dependents(name)
        for dependent in reversed(dependents):
            self._remove(dependent.name)
        self._remove(name)
        self._records.write_held(self._con, self._on_commit, self._on_rollback)
        relation_times.forget(self._con, name)  # a new definition: its own epochs' record
        create()
        for dependent in dependents:
            try:
                self._add_view(dependent.name, dependent.sql)
            except ViewFailed:  # explained (the failing expression named) by execute()
                raise
            except IvmError as error:
                raise type(error)(
                    f"view {dependent.name!r} reads {name!r} and cannot be created again over "
                    f"its new definition: {error}"
                ) from error

    def _dependents(self, name: str) -> list[ViewDef]:
        """Views reading ``name``, directly or through other views, in creation order."""
        found: set[str] = {name}
        for view in self._views.values():  # creation order: readers come after what they read
            if view.sources & found:
                found.add(view.name)
        return [v for v in self._views.values() if v.name in found and v.name != name]

    def _check_new_name(self, name: str) -> None:
        lowered = {n.lower() for n in [*self._tables, *self._views]}
        if name.lower() in lowered:
            raise SqlError(f"a table or view named {name!r} already exists")

    def _remove(self, name: str) -> None:
        """Drop table or view ``name`` and its state (dependents are the caller's)."""
        self._engine.removing(name)
        if name in self._views:
            self._feeds.removed(name)  # its changelog goes with it
            self._engine.drop_view_state(name, self._catalog.manifest(name))
            del self._views[name]
            self._no_change.pop(name, None)
        else:
            self._drop_table_state(name)
            del self._tables[name]
            del self._arrow_schemas[name]
        self._catalog.remove(name)

    # -- tables ------------------------------------------------------------------------------

    def _add_table(self, table: TableSchema) -> None:
        trace = self._names.relation_trace(table.name)
        try:
            create_trace(self._con, trace, [(c.name, c.type) for c in table.schema.columns])
        except duckdb.Error as error:
            raise SqlError(f"CREATE TABLE {table.name}: {duckdb_text(error)}") from error
        self._compactor.created(trace)
        # DuckDB's spelling of the types (TEXT → VARCHAR, INT → INTEGER…).
        actual = describe(self._con, f"SELECT * EXCLUDE ({W}) FROM {trace}")
        table = TableSchema(table.name, actual, table.primary_key, table.not_null)
        create_reader(self._con, table.name, trace, actual.names)
        self._catalog.add("table", table.name, table_to_json(table))
        self._register_table(table)
        self._on_commit.append(lambda: self._engine.publish(table.name))

    def _register_table(self, table: TableSchema) -> None:
        self._engine.table_registered(table)
        trace = self._names.relation_trace(table.name)
        self._tables[table.name] = table
        self._arrow_schemas[table.name] = (
            self._con.sql(f"SELECT * EXCLUDE ({W}) FROM {trace} LIMIT 0").to_arrow_table().schema
        )

    # -- views -------------------------------------------------------------------------------

    def _add_view(self, name: str, sql: str, origin: Origin = TEXT_START) -> None:
        view = self._register_view(name, sql, origin)
        self._catalog.add("view", name, sql)
        self._engine.build_view_state(view)

    def _register_view(self, name: str, sql: str, origin: Origin = TEXT_START) -> ViewDef:
        plan = self._plan(sql, origin)
        circuit = self._circuit(plan, name, join_plan_for(self, sql))
        view = ViewDef(name, sql, plan, circuit, plan.schema)
        self._views[name] = view
        return view
