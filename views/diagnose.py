"""Say which view and which of its expressions failed, in the user's terms.

When DuckDB fails while a view computes its change (a cast that cannot
succeed, an overflow…), its message quotes the SQL ivm generated. The user
wrote none of that. ``explain_failure`` re-evaluates, one by one, the scalar
expressions of the view's filters and projections over the rows they saw this
epoch, and names the first that fails, written with the user's column names.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import duckdb
from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.errors import ExecutionError
from ivm.operators.base import Operator

_GENERATED = re.compile(r"\n\s*\n?\s*LINE \d+:.*", re.DOTALL)


def duckdb_message(error: BaseException) -> str:
    """DuckDB's message without the generated SQL it quotes."""
    text = str(error.__cause__ or error)
    text = _GENERATED.sub("", text)
    text = re.sub(r"^evaluating a view failed: ", "", text)
    return text.strip()


def user_sql(expression: exp.Expression) -> str:
    """An expression as the user wrote it: ``"o.customer"`` back to ``o.customer``."""

    def unquote(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return exp.column(node.name, quoted=False)
        return node

    return expression.transform(unquote).sql(dialect="duckdb")


def explain_failure(
    con: duckdb.DuckDBPyConnection,
    view: str,
    circuit: Circuit,
    change_of: Callable[[Operator], str | None],
    error: BaseException,
) -> ExecutionError:
    """An ExecutionError naming the view and, when it can be found, the expression."""
    message = duckdb_message(error)
    for op in circuit.operators:
        for expression in op.node.row_expressions():
            if not op.inputs:
                continue
            try:
                rows = change_of(op.inputs[0])
            except Exception:  # noqa: BLE001 - the input itself failed: look further down
                continue
            if rows is None:
                continue
            probe = expression.sql(dialect="duckdb")
            try:
                con.execute(f"SELECT {probe} FROM ({rows}) AS __in").fetchall()
            except duckdb.Error as failure:
                return ExecutionError(
                    f"view {view!r}: evaluating {user_sql(expression)} failed on this batch: "
                    f"{duckdb_message(failure)}"
                )
    return ExecutionError(f"view {view!r} failed on this batch: {message}")
