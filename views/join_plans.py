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

from typing import Any

from ivm.passes.cyclic_joins import JOIN_PLANS, JoinPlan
from ivm.views.plan_options import hinted, option_property

HINTS = {"wcoj": "wcoj", "binary_join": "binary"}
"""Each hint word and the plan it asks for."""


def join_plan_of(sql: str, default: str) -> str:
    """The join plan of a view with query ``sql``: its hint's, else ``default``."""
    return hinted(sql, HINTS, default)


def join_plan_for(session: Any, sql: str) -> JoinPlan:
    """What the circuit passes are told of a view's joins: the plan chosen for query
    ``sql`` in ``session``, and its tables' primary keys."""
    keys = {name: tuple(t.primary_key) for name, t in session._tables.items()}
    return JoinPlan(join_plan_of(sql, session.join_plan), keys)


def join_plan_property() -> property:
    """``Session.join_plan``: the plan views planned from now on give their joins."""
    return option_property("join_plan", JOIN_PLANS, "auto", (
        "How views planned from now on maintain joins whose equi-join hypergraph is cyclic "
        "(triangles, cycles, cliques): 'auto' (default; worst-case-optimal delta queries), "
        "'wcoj' (every equi-join that way) or 'binary' (today's plans). A view's own "
        "hint, SELECT /*+ wcoj */ or SELECT /*+ binary_join */, overrides it. Both modes."))
