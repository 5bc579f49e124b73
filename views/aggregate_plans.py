"""Whether a view's aggregates over joins are factorized: the session's ``aggregate_plan``,
or a hint in the view.

``db.aggregate_plan`` is ``"flat"`` (the default: the aggregate over the whole join),
``"auto"`` (a GROUP BY of sums and counts over an acyclic join that fans out, some
edge on no primary key, is maintained as a tree of partial aggregates,
``ivm.passes.factorize``, which says what that costs and gains) or ``"factorized"``
(wherever that applies). It applies to views
planned while it is set. A view forces its own with a hint comment after a ``SELECT``
of its query: ``SELECT /*+ factorize */ …`` or ``SELECT /*+ no_factorize */ …``.
"""

from __future__ import annotations

from typing import Any

from ivm.passes.factorize import AGGREGATE_PLANS, AggregatePlan
from ivm.views.plan_options import hinted, option_property

HINTS = {"factorize": "factorized", "no_factorize": "flat"}
"""Each hint word and the plan it asks for."""


def aggregate_plan_for(session: Any, sql: str) -> AggregatePlan:
    """What the factorizing pass is told of a view: the plan chosen for query ``sql`` in
    ``session`` (its hint's, else the session's), and its tables' primary keys."""
    keys = {name: tuple(t.primary_key) for name, t in session._tables.items()}
    return AggregatePlan(hinted(sql, HINTS, session.aggregate_plan), keys)


def aggregate_plan_property() -> property:
    """``Session.aggregate_plan``: how views planned from now on keep aggregates over joins."""
    return option_property("aggregate_plan", AGGREGATE_PLANS, "flat", (
        "How views planned from now on maintain SUM/COUNT over joins: 'flat' (default; "
        "the aggregate over the whole join), 'auto' (factorized into partial aggregates "
        "where the join fans out) or 'factorized' (wherever possible). A view's own hint, "
        "SELECT /*+ factorize */ or SELECT /*+ no_factorize */, overrides it. Both modes."))
