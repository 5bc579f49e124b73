"""Rule: an unnamed subquery in a SELECT list is named as ``qualify`` would name it,
``_col_<i>``, by an ``AS`` of its own.

``qualify`` names such an item by setting the subquery's own alias, and its expansion
of ``ORDER BY <position>`` then insists on an ``Alias`` node there (sqlglot raises a bare
``AssertionError`` for ``SELECT a, (SELECT …) FROM t ORDER BY 2``). Wrapping the subquery
in the ``Alias`` node first gives the same name and the node it expects. The view's
columns are still named by DuckDB from the query's text.
"""

from __future__ import annotations

from sqlglot import exp


def name_subquery_outputs(expression: exp.Expression) -> exp.Expression:
    """``expression`` with every unnamed subquery of a SELECT list named ``_col_<i>``."""
    for select in list(expression.find_all(exp.Select)):
        for i, item in enumerate(select.expressions):
            if isinstance(item, exp.Subquery) and not item.alias:
                item.replace(exp.Alias(this=item.copy(), alias=exp.to_identifier(f"_col_{i}")))
    return expression
