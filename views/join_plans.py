"""Which plan a view's cyclic joins get: the session's ``join_plan``, or a hint in the view.

``db.join_plan`` is ``"auto"`` (the default: joins whose equi-join hypergraph is cyclic
are maintained by worst-case-optimal delta queries, the rest by today's plans),
``"wcoj"`` (every connected equi-join of the view that way) or ``"binary"`` (none:
the n-way delta query embedded, binary joins in Spark mode). It applies to views
planned while it is set: created then, or planned again when a session opens.

A view forces its own plan with a hint comment right after a ``SELECT`` of its query,
as Spark's and Oracle's hints are written: ``SELECT /*+ wcoj */ …`` or
``SELECT /*+ binary_join */ …``. The hint is part of the view's SQL, so it holds
whatever the session's option is when the view is planned again.
"""

from __future__ import annotations

import re
from typing import Any

from ivm.errors import IvmError
from ivm.passes.cyclic_joins import JOIN_PLANS, JoinPlan

_HINT = re.compile(r"/\*\+\s*(wcoj|binary_join)\s*\*/", re.IGNORECASE)
_PLAN_OF_HINT = {"wcoj": "wcoj", "binary_join": "binary"}


def join_plan_of(sql: str, default: str) -> str:
    """The join plan of a view with query ``sql``: its hint's, else ``default``."""
    hint = _HINT.search(sql)
    return _PLAN_OF_HINT[hint.group(1).lower()] if hint else default


def join_plan_for(session: Any, sql: str) -> JoinPlan:
    """What the circuit passes are told of a view's joins: the plan chosen for query
    ``sql`` in ``session``, and its tables' primary keys."""
    keys = {name: tuple(t.primary_key) for name, t in session._tables.items()}
    return JoinPlan(join_plan_of(sql, session.join_plan), keys)


def join_plan_property() -> property:
    """``Session.join_plan``: the plan views planned from now on give their joins."""

    def get(session: object) -> str:
        return getattr(session, "_join_plan", "auto")

    def set_(session: object, plan: str) -> None:
        if plan not in JOIN_PLANS:
            raise IvmError(f"join_plan must be one of {', '.join(map(repr, JOIN_PLANS))}, "
                           f"not {plan!r}")
        session._join_plan = plan  # type: ignore[attr-defined]

    return property(get, set_, doc=(
        "How views planned from now on maintain joins whose equi-join hypergraph is cyclic "
        "(triangles, cycles, cliques): 'auto' (default; worst-case-optimal delta queries), "
        "'wcoj' (every equi-join that way) or 'binary' (today's plans). A view's own "
        "hint, SELECT /*+ wcoj */ or SELECT /*+ binary_join */, overrides it."))
