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

import re
from typing import Any

from ivm.errors import IvmError
from ivm.passes.factorize import AGGREGATE_PLANS, AggregatePlan

_HINT = re.compile(r"/\*\+\s*(factorize|no_factorize)\s*\*/", re.IGNORECASE)
_PLAN_OF_HINT = {"factorize": "factorized", "no_factorize": "flat"}


def aggregate_plan_of(sql: str, default: str) -> str:
    """The aggregate plan of a view with query ``sql``: its hint's, else ``default``."""
    hint = _HINT.search(sql)
    return _PLAN_OF_HINT[hint.group(1).lower()] if hint else default


def aggregate_plan_for(session: Any, sql: str) -> AggregatePlan:
    """What the factorizing pass is told of a view: the plan chosen for query ``sql`` in
    ``session``, and its tables' primary keys."""
    keys = {name: tuple(t.primary_key) for name, t in session._tables.items()}
    return AggregatePlan(aggregate_plan_of(sql, session.aggregate_plan), keys)


def aggregate_plan_property() -> property:
    """``Session.aggregate_plan``: how views planned from now on keep aggregates over joins."""

    def get(session: object) -> str:
        return getattr(session, "_aggregate_plan", "flat")

    def set_(session: object, plan: str) -> None:
        if plan not in AGGREGATE_PLANS:
            raise IvmError(f"aggregate_plan must be one of "
                           f"{', '.join(map(repr, AGGREGATE_PLANS))}, not {plan!r}")
        session._aggregate_plan = plan  # type: ignore[attr-defined]

    return property(get, set_, doc=(
        "How views planned from now on maintain SUM/COUNT over joins: 'flat' (default; "
        "the aggregate over the whole join), 'auto' (factorized into partial aggregates "
        "where the join fans out) or 'factorized' (wherever possible). A view's own hint, "
        "SELECT /*+ factorize */ or SELECT /*+ no_factorize */, overrides it."))
