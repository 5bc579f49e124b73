"""Ingest of an embedded session: batches validated, every affected view's change, appends.

One ``ingest`` is one epoch inside one transaction (``Session.ingest``): each
table's batch is normalized to a Z-set and consolidated (``upsert`` turns an
insert of an existing key into a replacement), its deletes resolved to the
stored rows they take out and checked against the rows it touches
(``ivm.execution.constraints``; the table's row index vouches for most batches
without reading the table), then every view reading a changed
table or view computes its change in creation order, and only then is
anything appended to state, so every delta rule reads integrals from before
the epoch. A view failing on the batch's data raises an ``ExecutionError``
naming the view and the expression (``ivm.views.diagnose``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from ivm.errors import ExecutionError, IterationLimitError, IvmError, SchemaError
from ivm.execution.constraints import resolve_change, upsert_sql
from ivm.execution.embedded import EpochRunner, run_sql
from ivm.execution.exact import consolidate_exact_sql
from ivm.execution.profile import OUTPUT, EpochProfile
from ivm.execution.row_index import Change, RowIndex, hash_columns_sql
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import TableSchema
from ivm.storage.results import fetch_arrow
from ivm.views.arrival import arrived
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import ViewFailed, explain_failure
from ivm.views.direct_changes import append_returning, direct_views
from ivm.views.modes import spark_mode
from ivm.views.recompute import recompute_pays, recomputed_change

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


class Ingest(_Base):
    """The ingest half of ``Session`` (see the module docstring)."""

    def _prepared(
        self, table: str | Mapping[str, Any], batch: Any, mode: str, sequence: str | None = None
    ) -> dict[str, Any]:
        """The batches of one ``ingest`` call by table (stored spelling), each prepared."""
        self._check_open()
        if mode not in ("insert", "upsert"):
            raise IvmError(f"unknown ingest mode {mode!r}: use 'insert' or 'upsert'")
        if isinstance(table, Mapping) and batch is not None:
            raise IvmError(
                "ingest takes a table name and a batch, or one mapping of table names to "
                "batches, not both: put every batch in the mapping"
            )
        batches = dict(table) if isinstance(table, Mapping) else {table: batch}
        prepared = {}
        for name, rows in batches.items():
            stored = self._ingestible(name)
            if mode == "upsert" and not self._tables[stored].primary_key:
                raise SchemaError(
                    f"table {stored!r} has no PRIMARY KEY: mode='upsert' replaces the row with "
                    "the same key, so it needs one (insert and delete rows instead)"
                )
            if spark_mode(self):
                from ivm.views.spark.spool import spoolable, spooled  # imports pyspark

                if spoolable(self, stored, rows, mode):  # a stream: never held whole
                    prepared[stored] = spooled(self, stored, rows)
                    continue
            table_schema, arrow = self._tables[stored], self._arrow_schemas[stored]
            rows = arrived(  # key-only deletes, truncates, an upsert's versions (views.arrival)
                self._con, rows, table_schema, arrow,
                functools.partial(self._engine.live_sql, stored), mode == "upsert", sequence,
            )
            prepared[stored] = self._engine.prepare(stored, rows)
        if len(prepared) != len(batches):
            raise SchemaError("a table appears twice in one ingest (names ignore case)")
        return prepared

    def _ingestible(self, name: str) -> str:
        stored = self._resolve(name)
        if stored in self._views:
            raise SchemaError(f"{stored!r} is a view: ingest changes into its base tables")
        if stored not in self._tables:
            raise SchemaError(f"no table named {stored!r}")
        return stored

    def _advance_epoch(self, changed: dict[str, str]) -> None:
        """Advance the stored epoch inside the open transaction (``changed``: the changed
        views' scratch tables, for what logs them); the session's own count follows once it
        commits, first of the after-commit actions (so even if a later one fails, it
        matches what was committed)."""
        self._log_epoch(changed)  # changefeeds, streams, history (views.outside)
        run_sql(self._con, self._catalog.advance_sql())
        self._on_commit.insert(0, self._count_epoch)

    def _count_epoch(self) -> None:
        self._catalog.epoch += 1

    def _apply(
        self, batches: dict[str, pa.Table], upsert: bool, direct: bool = False
    ) -> dict[str, str]:
        """Validate and apply every change inside the open transaction; returns the
        scratch tables holding each changed view's consolidated change (``direct``: the
        views that may take the direct path do, ``views.direct_changes``: their changes are
        in ``_direct_changes``, and their scratch tables are not made)."""
        profile = self._profile
        with profile.phase("checks"):
            changes = self._table_changes(batches, upsert, check=True)
        commits = [(self._names.relation_trace(n), sql) for n, sql in changes.items()]
        runner = EpochRunner(
            self._con, self._names, changes, profile=profile, iteration_limit=self.iteration_limit,
            epoch=self._catalog.epoch + 1, memory=self._operator_memory,
            arrangements=self._arrangements, registered=self._registered_batches,
        )
        rows = sum(b.num_rows for b in batches.values() if isinstance(b, pa.Table))
        self._direct = direct_views(self, rows) if direct else frozenset()
        self._direct_changes = {}
        return self._run_views(runner, changes, commits)

    def _run_views(
        self, runner: EpochRunner, changes: dict[str, str], commits: list[tuple[str, str]]
    ) -> dict[str, str]:
        """Compute every affected view's change and append the epoch's rows to state;
        returns the scratch tables holding each changed view's consolidated change."""
        profile = self._profile
        changed_views: dict[str, str] = {}
        ran: set[str] = set()
        # Rows read into Arrow keep their exact types for the whole epoch: lookups' keys
        # compare with arranged rows as stored, and appends hash rows as stored.
        self._on_commit.append(self._arrangements.committed)
        self._on_rollback.append(self._arrangements.rolled_back)
        with self._arrangements.exporting():
            with profile.phase("views"):
                for view in self._views.values():
                    if not view.sources & set(changes):
                        continue
                    ran.add(view.name)
                    start = time.perf_counter()
                    scratch = self._view_change(runner, view, changes)
                    profile.views[view.name] = time.perf_counter() - start
                    if scratch is not None:
                        changed_views[view.name] = scratch
                    if view.name in changes:  # not a direct change: appended already
                        commits.append(
                            (self._names.relation_trace(view.name), changes[view.name])
                        )
                runner.forget_unmaintained(ran)
                self._on_commit.extend(runner.after_commit_actions)
            with profile.phase("state appends"):
                for table, rows in runner.commits:
                    self._append(table, rows)
                for table, rows in commits:  # consolidated changes
                    self._append(table, rows, True, self._retractions.get(table))
        return changed_views

    def _table_changes(
        self, batches: dict[str, pa.Table], upsert: bool, check: bool
    ) -> dict[str, str]:
        """Each table's consolidated change (and, with ``check``, checked against the live
        rows); returns SQL reading each change, by table.

        A batch whose rows are each there once (its hashes say so) is read where it is,
        registered with DuckDB until the epoch ends; any other batch (and any upsert) is
        consolidated into a scratch table first. Without ``check`` (replaying an epoch),
        deletes are still resolved to the stored rows, as the epoch did.
        """
        changes: dict[str, str] = {}
        self._changed_rows = {name: batch.num_rows for name, batch in batches.items()}
        self._retractions = {}
        for name, batch in batches.items():
            start, table = time.perf_counter(), self._tables[name]
            registered = self._registered_batches.register("__ivm_batch_", batch)
            rows = f"SELECT {column_list(table.schema.names)}, {W} FROM {registered}"
            hashes = None
            if not (upsert and table.primary_key):
                hashed = f"SELECT {hash_columns_sql(table)}, {W} FROM {registered}"
                hashes = Change.read(self._con, hashed)
            if hashes is None or not hashes.consolidated():
                rows, hashes = self._consolidated(table, registered, upsert)
            changes[name] = self._checked(table, hashes, rows, check)
            if check:  # the epoch's own time and rows (a load adds each chunk's)
                self._profile.tables[name] = self._profile.tables.get(name, 0.0) + (
                    time.perf_counter() - start)
                self._profile.rows[name] = self._profile.rows.get(name, 0) + batch.num_rows
        return changes

    def _consolidated(
        self, table: TableSchema, registered: str, upsert: bool
    ) -> tuple[str, Change]:
        """The batch consolidated into the table's scratch change table (an upsert's
        inserts retracting the rows they replace): SQL reading it, and its hashes."""
        change = self._names.change(table.name)
        source = consolidate_exact_sql(f"SELECT * FROM {registered}", table.schema)
        if upsert and table.primary_key:
            source = upsert_sql(table, source, self._names.relation_trace(table.name))
        self._con.execute(
            f"CREATE OR REPLACE TEMP TABLE {change} AS "
            f"SELECT *, {hash_columns_sql(table)} FROM ({source}) AS c"
        ).fetchall()
        rows = f"SELECT {column_list(table.schema.names)}, {W} FROM {change}"
        return rows, Change.read(self._con, f"SELECT * FROM {change}")

    def _unregister_batches(self) -> None:
        self._registered_batches.release()

    def _checked(self, table: TableSchema, hashes: Change, rows: str, check: bool) -> str:
        """The change ``rows`` as it applies to the stored rows (SQL reading it); with
        ``check``, ConstraintError unless it keeps the table's rules (API.md).

        The table's row index vouches for a change whose deletes are each byte for byte a
        live row and which keeps the rules: it applies as it is. Any other change is
        resolved to the stored rows and checked exactly in SQL (one read of the rows it
        touches), and the index follows the resolved change.
        """
        index = self._row_index(table)
        trace = self._names.relation_trace(table.name)
        self._retractions[trace] = None  # unless the change applies as it is
        if index.accepts(hashes):
            if check:
                self._on_commit.append(lambda: self._index_applied(table.name, index, hashes))
            self._retractions[trace] = int(np.count_nonzero(hashes.weights < 0))
            return rows
        into = self._names.scratch(table.name, "ingest", "resolved")
        resolved = resolve_change(
            self._con, table, rows, self._names.relation_trace(table.name), into,
            self._names.scratch(table.name, "ingest", "touched"), check=check,
        )
        if check:
            exact = Change.read(self._con, f"SELECT {hash_columns_sql(table)}, {W} FROM {into}")
            if index.accepts(exact):
                self._on_commit.append(lambda: self._index_applied(table.name, index, exact))
            else:  # it passed: the index was misled by a hash collision; rebuild it
                self._on_commit.append(lambda: self._row_indexes.pop(table.name, None))
        return resolved

    def _row_index(self, table: TableSchema) -> RowIndex:
        """The table's row index, built from its trace at first use."""
        index = self._row_indexes.get(table.name)
        if index is None:
            trace = self._names.relation_trace(table.name)
            index = self._row_indexes[table.name] = RowIndex.load(self._con, table, trace)
        return index

    def _index_applied(self, name: str, index: RowIndex, change: Change) -> None:
        if self._row_indexes.get(name) is index and not index.apply(change):
            del self._row_indexes[name]

    def _view_change(
        self, runner: EpochRunner, view: ViewDef, changes: dict[str, str]
    ) -> str | None:
        """Compute ``view``'s consolidated change into its scratch table (recorded in
        ``changes``); None when it has none. ViewFailed when its SQL fails."""
        if not view.sources & set(changes):
            return None
        scratch = self._names.change(view.name)
        try:
            if recompute_pays(self, view, changes):
                delta = recomputed_change(self, runner, view, changes)
            else:
                delta = runner.run(view.circuit)
            if delta is None:
                return None
            consolidated = consolidate_sql(delta, view.schema.names)
            start = time.perf_counter()
            if view.name in self._direct:  # appended and fetched at once (views.direct_changes)
                appended = append_returning(self, view, consolidated)
                rows = appended.num_rows
                if rows:
                    self._direct_changes[view.name] = appended
            else:
                rows = run_sql(
                    self._con, f"CREATE OR REPLACE TEMP TABLE {scratch} AS {consolidated}",
                    view.name,
                )
            self._profile.record(view.name, OUTPUT, time.perf_counter() - start, rows)
        except IterationLimitError as error:  # replaying the epoch would only repeat it
            raise IterationLimitError(f"view {view.name!r}: {error}") from None
        except ExecutionError as error:
            raise ViewFailed(view, error) from error
        self._changed_rows[view.name] = rows
        self._profile.rows[view.name] = self._profile.rows.get(view.name, 0) + rows
        if rows == 0:  # the change cancelled out: nothing to append, fetch or propagate
            return None
        if view.name not in self._direct_changes:  # a direct change has no scratch table
            changes[view.name] = f"SELECT * FROM {scratch}"
        return scratch

    def _explain_ingest(
        self, batches: dict[str, pa.Table], upsert: bool, failure: ViewFailed
    ) -> ExecutionError:
        """The ingest's failure in the user's terms: the epoch is replayed in a throwaway
        transaction up to the failing view, whose expressions are then tried one by one."""
        self._direct, self._direct_changes = frozenset(), {}  # every change in its scratch
        self._con.execute("BEGIN TRANSACTION").fetchall()
        try:
            changes = self._table_changes(batches, upsert, check=False)
            runner = EpochRunner(
                self._con, self._names, changes, iteration_limit=self.iteration_limit,
                epoch=self._catalog.epoch + 1,
            )
            for view in self._views.values():
                if view.name == failure.view.name:
                    return explain_failure(
                        self._con, view.name, view.circuit, runner.change, failure.error
                    )
                self._view_change(runner, view, changes)
        except (duckdb.Error, IvmError):
            pass
        finally:
            self._con.execute("ROLLBACK").fetchall()
            self._unregister_batches()
        return failure

    def _append(
        self, table: str, rows: str, consolidated: bool = False, retracted: int | None = None
    ) -> None:
        """Append ``rows`` to the trace ``table`` and record how many for compaction
        (``consolidated``: each row of ``rows`` is there once; ``retracted``: how many of
        them have a negative weight, when known)."""
        count = self._arrangements.append(table, rows)
        self._compactor.appended(table, count, consolidated, retracted)

    def _finish_epoch(
        self, profile: EpochProfile, changed: dict[str, str]
    ) -> dict[str, pa.Table]:
        """After an epoch committed: every view's change as Arrow, the traces that are due
        compacted, the profile kept, subscribers told; returns the changes by view."""
        with profile.phase("results"):
            result = {view: self._fetch_change(view, changed) for view in self._views}
        self._direct, self._direct_changes = frozenset(), {}
        with profile.phase("compaction"):
            self._engine.compact()
        self.last_profile = profile
        self._after_epoch(result)
        return result

    def _fetch_change(self, view: str, changed: dict[str, str]) -> pa.Table:
        if view in changed:
            direct = self._direct_changes.get(view)
            if direct is not None:  # fetched when appended (views.direct_changes)
                return direct
            return fetch_arrow(self._con, f"SELECT * FROM {changed[view]}")
        if view not in self._no_change:
            names = self._views[view].schema.names
            trace = self._names.relation_trace(view)
            self._no_change[view] = self._con.sql(
                f"SELECT {column_list(names)}, {W} FROM {trace} LIMIT 0"
            ).to_arrow_table()
        return self._no_change[view]
