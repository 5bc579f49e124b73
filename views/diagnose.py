"""Say which view and which of its expressions failed, in the user's terms.

When DuckDB fails while a view computes its change (a cast that cannot
succeed, an overflow…), its message quotes the SQL ivm generated. The user
wrote none of that. ``explain_failure`` re-evaluates, one by one, the scalar
expressions of the view's filters and projections over the rows they saw this
epoch (in a transaction of its own: DuckDB refuses further work in one that
failed), and names the first that fails, written with the user's column names.

Only a value is ever blamed: SQL of ivm's own that DuckDB cannot parse or bind is
an ``InternalError`` (``ivm.execution.failures``). ``explain_internal`` finds, for one
that failed filling a new view, the construct whose SQL it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import duckdb
from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.errors import ExecutionError, InternalError, IvmError
from ivm.execution.failures import construct_of, duckdb_text, in_view, is_data_error
from ivm.guard import internal_message
from ivm.operators.base import Operator
from ivm.views.definitions import ViewDef

_GENERATED = re.compile(r"\n\s*\n?\s*LINE \d+:.*", re.DOTALL)
_NAMED = re.compile(r"^view (?:'[^']*'|\"[^\"]*\"): ")


BATCH = "on this batch"
EXISTING = "on the rows already there"
"""What a view was evaluating when it failed: a batch's change, or (filling a new or
rebuilt view) the existing rows."""


class ViewFailed(ExecutionError):
    """A view's SQL failed on this epoch's data (``view``; DuckDB's ``error``), or, filling
    a new view, on SQL of ivm's own (``internal``: the ``InternalError``, which is what
    the session raises once it is explained, never this ``ExecutionError``).

    Raised inside the epoch's transaction, which DuckDB then refuses to use;
    the session rolls back and replays the epoch to name the failing expression.
    """

    def __init__(self, view: ViewDef, error: BaseException, during: str = BATCH) -> None:
        super().__init__(f"view {view.name!r} failed {during}: {duckdb_message(error)}")
        self.view = view
        self.internal = error if isinstance(error, InternalError) else None
        self.error = (error.__cause__ or error) if self.internal is not None else error
        self.during = during


def duckdb_message(error: BaseException) -> str:
    """DuckDB's message without the generated SQL it quotes."""
    text = str(error.__cause__ or error)
    text = _GENERATED.sub("", text)
    text = re.sub(r"^evaluating a view failed: ", "", text)
    return text.strip()


def named(error: IvmError, view: str) -> IvmError:
    """``error`` (a Spark task's, translated) as an error of its class naming ``view``: a
    task knows only its stage, and DuckDB's message loses the SQL it quotes."""
    text = _NAMED.sub("", duckdb_message(error), count=1)
    return type(error)(f"view {view!r}: {text}")


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
    during: str = BATCH,
) -> ExecutionError:
    """An ExecutionError naming the view and, when it can be found, the expression.

    Each operator's input rows are fetched from ``con`` (an input that fails is
    skipped: the culprit is further down), then its expressions are tried in a
    scratch connection, where a failure spoils nothing.
    """
    message = duckdb_message(error)
    timezone = con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
    scratch = duckdb.connect()
    try:
        scratch.execute(f"SET TimeZone = '{str(timezone).replace(chr(39), chr(39) * 2)}'")
        for op in circuit.operators:
            expressions = op.node.row_expressions()
            if not expressions or not op.inputs:
                continue
            try:
                rows = change_of(op.inputs[0])
                if rows is None:
                    continue
                scratch.register("__ivm_rows", con.sql(rows).to_arrow_table())
            except Exception:  # noqa: BLE001 - the input itself failed: look further down
                continue
            for expression in expressions:
                failure = _failure(scratch, expression)
                if failure is not None:
                    culprit, text = _narrowed(scratch, expression, failure)
                    return ExecutionError(
                        f"view {view!r}: evaluating {user_sql(culprit)} failed {during}: {text}"
                    )
    finally:
        scratch.close()
    return ExecutionError(f"view {view!r} failed {during}: {message}")


def explain_internal(
    con: duckdb.DuckDBPyConnection,
    view: str,
    circuit: Circuit,
    change_of: Callable[[Operator], str | None],
    error: InternalError,
) -> InternalError:
    """``error`` (SQL of ivm's own that DuckDB refused) naming the view and, when it can be
    found, the construct: each operator's change is bound (``DESCRIBE``) in dependency
    order until one fails (a linear operator's SQL runs composed into its consumer's, so
    the statement that failed may not be the one at fault)."""
    for op in circuit.operators:
        try:
            sql = change_of(op)
        except InternalError as failure:  # a statement of the operator's own: it names it
            return in_view(failure, view)
        if sql is None:
            continue
        try:
            con.execute(f"DESCRIBE {sql}").fetchall()
        except duckdb.Error as failure:
            if is_data_error(failure):
                break
            found = InternalError(internal_message(duckdb_text(failure), view, construct_of(op)))
            found.__cause__ = failure
            return found
    return in_view(error, view)


def _failure(con: duckdb.DuckDBPyConnection, expression: exp.Expression) -> str | None:
    """DuckDB's message when evaluating ``expression`` over the rows fails, else None."""
    try:
        con.execute(f"SELECT {expression.sql(dialect='duckdb')} FROM __ivm_rows").fetchall()
    except duckdb.Error as error:
        # Only a value is a culprit: an expression this replay cannot bind on its own (it
        # reads a subquery's result, say) says nothing about the data.
        return duckdb_message(error) if is_data_error(error) else None
    return None


def _narrowed(
    con: duckdb.DuckDBPyConnection, expression: exp.Expression, message: str
) -> tuple[exp.Expression, str]:
    """The smallest part of a failing ``expression`` that fails on its own (on a value)."""
    for child in expression.iter_expressions():
        if isinstance(child, (exp.Column, exp.Literal, exp.DataType)) or not child.find(
            exp.Column
        ):
            continue
        failure = _failure(con, child)
        if failure is not None:
            return _narrowed(con, child, failure)
    return expression, message
