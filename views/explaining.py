"""What ``Session.explain`` prints: a view's circuit, and with ``analyze`` the last epoch's
profile and the arrangements the view reads; and ``plain_sql``, the view recomputed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ivm.circuit.circuit import Circuit
from ivm.errors import IvmError, SqlError
from ivm.execution.arrangements import ArrangementSize
from ivm.execution.profile import EpochProfile
from ivm.plan.node import plain_sql
from ivm.storage.naming import TableNames
from ivm.views import relation_times
from ivm.views.plan_picture import FORMATS, dot_source, render

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


class Explaining(_Base):
    """``explain`` and ``plain_sql`` of ``Session``."""

    def explain(self, view: str, analyze: bool = False, format: str = "text") -> str | bytes:
        """The incremental circuit of ``view``, one operator per line. With ``analyze``,
        the last epoch's profile too: its phases, the view's time and strategy, and each
        operator's statements, time and rows (as DuckDB's EXPLAIN ANALYZE; Spark mode: each
        stage's tasks, time and rows). A session that has run no epoch yet shows the last
        one the state recorded (``views.relation_times``).

        ``format="dot"``: a picture of the plan as Graphviz DOT text (operators, the
        arrangements the view reads and who shares them, Spark stages; with ``analyze``,
        each operator's rows and time); ``"svg"`` / ``"png"``: the picture's bytes, drawn
        by Graphviz's ``dot`` where it is installed (``views.plan_picture``). Both modes.
        """
        view = self._view_named(view)
        circuit = self._views[view].circuit
        if format != "text":
            return self._picture(view, analyze, format)
        if not analyze:
            text = circuit.explain()
        else:
            text = explain_text(
                view, circuit, self._analyzed(), self._arrangements.sizes(), self._names
            )
        tail = self._engine.explain_tail(view)  # Spark: its stages
        return text if tail is None else f"{text}\n{tail}"

    def _picture(self, view: str, analyze: bool, format: str) -> str | bytes:
        if format not in FORMATS:
            raise IvmError(f"explain format must be one of {', '.join(FORMATS)}, not {format!r}")
        stages = self._engine.stages(view)
        source = dot_source(
            view, self._views[view].circuit, self._analyzed() if analyze else None,
            self._arrangements.sizes(), self._names, stages,
        )
        return source if format == "dot" else render(source, format)

    def _analyzed(self) -> EpochProfile | None:
        """This session's last epoch's profile, else the last the state recorded."""
        return self.last_profile or relation_times.last_profile(self._con)

    def plain_sql(self, view: str) -> str:
        """The view's logical plan as one ordinary DuckDB query over its tables and views:
        what recomputing it from scratch runs (a second oracle for the planner). Both
        modes."""
        return plain_sql(self._views[self._view_named(view)].plan)

    def _view_named(self, view: str) -> str:
        """The stored spelling of an existing view; SqlError if there is none."""
        self._check_open()
        name = self._resolve(view)
        if name not in self._views:
            raise SqlError(f"no view named {view!r}")
        return name


def explain_text(
    view: str,
    circuit: Circuit,
    profile: EpochProfile | None,
    arrangements: Sequence[ArrangementSize],
    names: TableNames,
) -> str:
    """The analyzed explanation of ``view`` (``profile``: the last epoch's, if any)."""
    if profile is None:
        return circuit.explain() + "\nno epoch has run on this state (or none was recorded)"
    header, tree = circuit.explain(lambda op: profile.annotation(view, op.fingerprint)).split(
        "\n", 1
    )
    text = f"{profile.summary(view)}\n{header}{profile.output(view)}\n{tree}"
    return text + "".join(f"\n{line}" for line in arrangement_lines(view, arrangements, names))


def arrangement_lines(
    view: str, arrangements: Sequence[ArrangementSize], names: TableNames
) -> list[str]:
    """What ``explain(analyze=True)`` says of the arrangements ``view`` reads."""
    sizes = [s for s in arrangements if view in s.readers]
    if not sizes:
        return []
    lines = ["arrangements read (in memory; one per trace and key, shared):"]
    for size in sorted(sizes, key=lambda s: (s.table, s.key)):
        readers = ", ".join(repr(r) for r in size.readers)
        held = len(size.columns)
        part = f", {held} of its {size.of_columns} columns" if held < size.of_columns else ""
        lines.append(
            f"  {names.describe(size.table)} by ({', '.join(size.key)}){part}: "
            f"{size.entries:,} entries, {size.bytes / 1e6:,.1f} MB; read by {readers}"
        )
    return lines
