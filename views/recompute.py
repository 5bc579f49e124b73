"""Recomputing a view in place of maintaining it, when an epoch changes much of its input.

An epoch maintains each affected view from the change alone, at a cost that follows
the change. When the change is a large share of the rows a view reads (a bulk update,
a backfill arriving as one batch), computing the view again from its inputs is
cheaper: the view's new contents are computed from its inputs' new contents (their
traces with this epoch's changes added), its change is the new contents minus the
old (its own trace), and its operators' state is built again from those inputs,
exactly as a view created over existing rows builds it. Both ways give the same
change and the same state; only the cost differs.

The choice, per view and epoch: recompute when the rows changed in the view's inputs
reach ``Session.recompute_fraction`` (default ``RECOMPUTE_FRACTION``) of the rows their
traces hold, and at least ``RECOMPUTE_MIN_ROWS``; ``recompute_fraction = None`` always
maintains. ``explain(analyze=True)`` says which ran (``strategy: recompute``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm.errors import IvmError
from ivm.execution.embedded import EpochRunner, run_sql
from ivm.plan.sql import W, column_list
from ivm.storage.results import fetch_first
from ivm.views.definitions import ViewDef

if TYPE_CHECKING:
    from ivm.views.session import Session

RECOMPUTE_FRACTION = 0.5
"""Recompute a view when its inputs' changed rows reach this share of their rows… (An
epoch's maintenance costs about three times a recomputation's per row: at 1M orders,
bench_aggregate's views maintain 100k changed rows in about the time they recompute
from 1.1M, so recomputing pays from about a third of the input; half leaves margin.)"""
RECOMPUTE_MIN_ROWS = 10_000
"""…and are at least this many (a small change is always maintained)."""


def recompute_pays(session: Session, view: ViewDef, changes: dict[str, str]) -> bool:
    """Whether recomputing ``view`` this epoch costs less than maintaining it."""
    fraction = session.recompute_fraction
    changed = sum(session._changed_rows.get(s, 0) for s in view.sources if s in changes)
    if fraction is None or changed < RECOMPUTE_MIN_ROWS:
        return False
    held = sum(trace_rows(session, session._names.relation_trace(s)) for s in view.sources)
    return changed >= fraction * held


def trace_rows(session: Session, trace: str) -> int:
    """About how many rows ``trace`` holds: as the compactor counted them since it last
    knew the whole (a load, a compaction), else as DuckDB counts them (one query)."""
    size = session._compactor.sizes.get(trace)
    if size is not None and (size.base > 0 or size.empty):
        return size.base + size.appended
    found = fetch_first(session._con, f"SELECT count(*) FROM {trace}")
    return int(found[0]) if found else 0


def recomputed_change(
    session: Session, runner: EpochRunner, view: ViewDef, changes: dict[str, str]
) -> str | None:
    """SQL of ``view``'s change this epoch, recomputed: its new contents (from its
    inputs' new contents) minus its old; its operators' state is built again."""
    s = session
    names = s._names
    inputs = {}
    for source in view.sources:
        columns = column_list(s._schema_of(source).names)
        rows = f"SELECT {columns}, {W} FROM {names.relation_trace(source)}"
        if source in changes:
            rows += f" UNION ALL SELECT * FROM ({changes[source]}) AS __c"
        inputs[source] = rows
    for op, spec in view.circuit.traces():  # state built again, from empty traces
        table = names.operator_trace(view.name, op.fingerprint, spec.role)
        run_sql(s._con, f"DELETE FROM {table}", view.name)
        s._arrangements.forget(table)
        s._compactor.created(table)
    for key in [k for k in s._operator_memory if k[0] == view.name]:
        del s._operator_memory[key]
    builder = EpochRunner(
        s._con, names, inputs, backfill=True, iteration_limit=s.iteration_limit,
        epoch=runner.epoch, profile=runner.profile,
    )
    contents = builder.run(view.circuit)
    old = names.relation_trace(view.name)
    columns = column_list(view.schema.names)
    retracted = f"SELECT {columns}, -{W} AS {W} FROM {old}"
    if runner.profile is not None:
        runner.profile.strategies[view.name] = "recompute"
    if contents is None:  # no rows now: the change takes out every old one
        return retracted
    scratch = names.scratch(view.name, "recompute", "contents")
    # Computed before the state appends: its SQL reads operators' (empty) integrals.
    run_sql(s._con, f"CREATE OR REPLACE TEMP TABLE {scratch} AS {contents}", view.name)
    for table, rows in builder.commits:
        appended = run_sql(s._con, f"INSERT INTO {table} {rows}", view.name)
        s._compactor.backfilled(table, appended)
    return f"SELECT {columns}, {W} FROM {scratch} UNION ALL {retracted}"


def recompute_fraction_property() -> property:
    """``Session.recompute_fraction``: when a view is recomputed rather than maintained."""

    def get(session: object) -> float | None:
        return getattr(session, "_recompute_fraction", RECOMPUTE_FRACTION)

    def set_(session: object, fraction: float | None) -> None:
        if fraction is not None and (
            isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or fraction < 0
        ):
            raise IvmError(f"recompute_fraction must be None or a number >= 0, not {fraction!r}")
        session._recompute_fraction = fraction  # type: ignore[attr-defined]

    return property(get, set_, doc=(
        "Recompute a view, rather than maintain it, in an epoch whose changed input rows "
        f"reach this share of the rows its inputs hold (and at least {RECOMPUTE_MIN_ROWS:,}); "
        f"default {RECOMPUTE_FRACTION}; None: always maintain. Same results either way. "
        "Embedded mode; Spark mode always maintains."))
