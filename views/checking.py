"""``db.check(sql)``: can this view be maintained, and what state would it keep?

Like ``EXPLAIN CREATE MATERIALIZED VIEW`` elsewhere: the query (or a whole
``CREATE [MATERIALIZED] VIEW name AS …``) is planned and compiled to its circuit
over the session's tables and views exactly as ``CREATE VIEW`` would, and nothing
is created. The answer is a ``Check``: ``maintained`` or not; if not, the error
(``ivm.UnsupportedSQL`` or ``ivm.SqlError``: the construct and its place in the
text); if so, the circuit and every trace it would keep (the operator, the columns
and the key), so "what will this cost me" is answered before any data moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ivm.errors import IvmError, SqlError
from ivm.sql_frontend.positions import TEXT_START, Origin
from ivm.sql_frontend.statements import CreateView, parse_script

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object

CHECKED = "checked"
"""The name a bare query is planned under."""


@dataclass(frozen=True)
class StateTrace:
    """One trace a maintained view would keep: who keeps it, its columns, its key."""

    operator: str
    role: str
    columns: tuple[str, ...]
    key: tuple[str, ...]

    def __str__(self) -> str:
        key = f" by ({', '.join(self.key)})" if self.key else ""
        return f"{self.operator}: {self.role} [{', '.join(self.columns)}]{key}"


@dataclass(frozen=True)
class Check:
    """The answer of ``db.check``: printable, and each part as data."""

    sql: str
    maintained: bool
    error: IvmError | None = None
    """Why the view cannot be maintained (its message names the construct and where)."""
    columns: tuple[str, ...] = ()
    """The view's columns (maintained only)."""
    plan: str = ""
    """The incremental circuit, as ``explain`` prints it (maintained only)."""
    state: tuple[StateTrace, ...] = field(default_factory=tuple)
    """Every trace it would keep: its output and each operator's state."""

    def __bool__(self) -> bool:
        return self.maintained

    def __str__(self) -> str:
        if not self.maintained:
            return f"refused: {self.error}"
        lines = [f"maintained: columns {', '.join(self.columns)}", "state it keeps:"]
        lines += [f"  {trace}" for trace in self.state]
        return "\n".join([*lines, self.plan])


class Checking(_Base):
    """``check`` of ``Session`` (see the module docstring)."""

    def check(self, sql: str) -> Check:
        """Whether the view ``sql`` defines can be maintained, without creating anything.

        ``sql``: a query, or one ``CREATE [MATERIALIZED] VIEW name AS query``. Returns a
        ``Check`` (``views.checking``): truthy when maintained, with the view's columns,
        circuit and the state (traces) it would keep; else falsy, with ``error``: the
        ``IvmError`` that ``CREATE VIEW`` would raise. Both modes.
        """
        self._check_open()
        name, query, origin = _view_text(sql)
        try:
            plan = self._plan(query, origin)
            circuit = self._circuit(plan, name)
        except IvmError as error:
            return Check(sql, False, error=error)
        state = [StateTrace("output", "the view's rows", tuple(plan.schema.names), ())]
        state += [
            StateTrace(f"#{circuit.operators.index(op)} {op.label()}", spec.role,
                       tuple(spec.schema.names), spec.key)
            for op, spec in circuit.traces()
        ]
        return Check(sql, True, columns=tuple(plan.schema.names), plan=circuit.explain(),
                     state=tuple(state))


def _view_text(sql: str) -> tuple[str, str, Origin]:
    """(name, query, where the query starts) of a bare query or of one CREATE VIEW."""
    if not isinstance(sql, str):
        raise IvmError(f"check takes SQL text, not {type(sql).__name__}")
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head != "CREATE":
        return CHECKED, sql, TEXT_START
    statements = parse_script(sql)
    if len(statements) != 1 or not isinstance(statements[0], CreateView):
        raise SqlError("check takes one query or one CREATE VIEW statement")
    view = statements[0]
    return view.name, view.sql, view.origin
