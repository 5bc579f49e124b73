"""The sqlglot optimizer rules the planner runs before it reads a query, in order.

As in sqlglot's own ``optimizer.optimize``: one tuple lists the rules, and each
rule gets only the keyword arguments its signature names, so a rule is added
by listing it (``unnest_subqueries``, ``simplify``… later).

* ``name_subquery_outputs`` names each unnamed subquery of a SELECT list ``_col_<i>``
  with an ``AS`` (``qualify``'s ``ORDER BY <position>`` expects that node);
* ``exists_select_one`` makes ``EXISTS (SELECT * …)`` ``EXISTS (SELECT 1 …)`` where the
  list cannot matter, so that no column is read through it;
* ``qualify`` expands ``*``, resolves every column to its source, turns
  ``USING`` into ``ON`` and expands positional and alias references in GROUP BY;
* ``limit_in_exists`` drops an ``ORDER BY … LIMIT n`` (n ≥ 1) inside EXISTS, which
  cannot change its result;
* ``inline_windows`` puts each named window (``WINDOW w AS (…)``) into the OVER
  clauses that name it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import ensure_schema

from ivm.sql_frontend.exists_select import exists_select_one
from ivm.sql_frontend.limit_in_exists import limit_in_exists
from ivm.sql_frontend.named_windows import inline_windows
from ivm.sql_frontend.subquery_outputs import name_subquery_outputs

Rule = Callable[..., exp.Expression]

RULES: tuple[Rule, ...] = (
    name_subquery_outputs, exists_select_one, qualify, limit_in_exists, inline_windows
)
"""The rules, applied in this order."""


def apply_rules(
    expression: exp.Expression, rules: Sequence[Rule] | None = None, **options: Any
) -> exp.Expression:
    """``expression`` rewritten by each rule of ``rules`` (default: ``RULES``) in turn, on a
    copy (the input is kept).

    ``options`` (``schema``, ``dialect``, ``quote_identifiers``,
    ``validate_qualify_columns``…) go to each rule that names them; a ``schema``
    given as a mapping is made a sqlglot schema once, for all rules.
    """
    if "schema" in options:
        options["schema"] = ensure_schema(options["schema"], dialect=options.get("dialect"))
    expression = expression.copy()
    for rule in RULES if rules is None else rules:
        accepted = inspect.signature(rule).parameters
        expression = rule(expression, **{k: v for k, v in options.items() if k in accepted})
    return expression
