"""Pass: a global aggregate becomes partials in each partition, merged by a global aggregate.

A global aggregate (no GROUP BY) runs in one place. When all its calls are
invertible that place keeps one row (the running sums), and a change costs its
rows; but a MIN, a MAX or a COUNT(DISTINCT) keeps the input's live rows to
recompute from, and in one place that is the whole input's trace on one
partition. Instead, when every call merges from partials, each partition keeps
its own share of the input (hashed by the whole row, or by the argument of the
DISTINCT calls, so each distinct value lives in one partition) and computes the
aggregate of its rows; only those partials, at most a row per partition, reach
the one place that merges them:

    COUNT(*), COUNT(x), COUNT(DISTINCT x)  ->  COALESCE(SUM(partials), 0)
    SUM(x), SUM(DISTINCT x) (exact types)  ->  SUM(partials)
    MIN, MAX, BOOL_AND, BOOL_OR            ->  the same function of the partials

A partition's partials over no rows (a count of 0, NULL otherwise) change no
merge. Float sums and averages do not split (a sum of rounded partial sums is
not the exactly rounded sum), nor does anything else (medians, lists, VAR…).

In (row, weight) terms nothing changes: the local aggregate's partitions each
hold one live row, and the merge is the global aggregate's one row. Only
partitioned execution (Spark mode) asks for it; embedded mode keeps one
aggregate, whose state is already searchable by key.
"""

from __future__ import annotations

import dataclasses
import re

from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.operators.aggregate import Aggregate, AggregateCall, LocalAggregate
from ivm.operators.base import Describe, Operator
from ivm.operators.invertible_aggregate import InvertibleAggregate
from ivm.operators.project import Project
from ivm.operators.registry import operator_for
from ivm.schema import Column, Schema

MERGES = {
    "count_star": "sum", "count": "sum", "sum": "sum",
    "min": "min", "max": "max", "bool_and": "bool_and", "bool_or": "bool_or",
}
"""Each function whose value merges from partials, and the function that merges them."""

COUNTS = frozenset({"count_star", "count"})
"""Functions whose merged value is a count: 0, not NULL, over no partials."""

_CLOSED_SUM = re.compile(r"HUGEINT|DECIMAL\(38,\s*\d+\)")
"""Result types of SUM that a SUM of them keeps (exact integers and decimals)."""

PARTIAL = "__ivm_part{}"
MERGED = "__ivm_merged{}"


def split_global_aggregates(
    circuit: Circuit, partitioned: bool = False, describe: Describe | None = None
) -> Circuit:
    """``circuit`` with each global aggregate that keeps its input's rows computed as
    partials in each partition and merged in one place (only when ``partitioned``)."""
    if not partitioned or describe is None:
        return circuit
    return circuit.rewrite(lambda op: _split(op, describe))


def _split(op: Operator, describe: Describe) -> Operator:
    node = op.node
    if type(node) is not Aggregate or node.keys or isinstance(op, InvertibleAggregate):
        return op  # grouped, already split, or keeping one row of sums
    rows_by = partials_key(node)
    if rows_by is None:
        return op
    local = LocalAggregate(
        schema=Schema(tuple(
            Column(PARTIAL.format(i), node.schema.type_of(c.name))
            for i, c in enumerate(node.calls)
        )),
        input=node.input,
        keys=(),
        calls=tuple(
            dataclasses.replace(c, name=PARTIAL.format(i)) for i, c in enumerate(node.calls)
        ),
        partition_by=rows_by,
    )
    merge = Aggregate(
        schema=Schema(tuple(
            Column(MERGED.format(i), _merged_type(c, node)) for i, c in enumerate(node.calls)
        )),
        input=local,
        keys=(),
        calls=tuple(
            AggregateCall(MERGED.format(i), MERGES[c.func], (PARTIAL.format(i),))
            for i, c in enumerate(node.calls)
        ),
    )
    final = Project(
        schema=node.schema,
        input=merge,
        exprs=tuple((c.name, _final(c, i, node)) for i, c in enumerate(node.calls)),
    )
    local_op = operator_for(local, op.inputs, describe)
    merge_op = operator_for(merge, (local_op,), describe)
    return operator_for(final, (merge_op,), describe)


def partials_key(node: Aggregate) -> tuple[str, ...] | None:
    """The input columns to partition a global aggregate's rows by so that each call
    merges from the partitions' partials; None when some call does not merge."""
    distinct_args = {c.args for c in node.calls if c.distinct and c.func not in ("min", "max")}
    if len(distinct_args) > 1:
        return None
    for call in node.calls:
        if call.func not in MERGES or call.order:
            return None
        if call.func == "sum" and not _CLOSED_SUM.fullmatch(node.schema.type_of(call.name)):
            return None
    if distinct_args:
        (args,) = distinct_args
        return args
    return tuple(node.input.schema.names)


def _merged_type(call: AggregateCall, node: Aggregate) -> str:
    """The type of the merge of ``call``'s partials (DuckDB sums BIGINT counts as HUGEINT)."""
    return "HUGEINT" if call.func in COUNTS else node.schema.type_of(call.name)


def _final(call: AggregateCall, index: int, node: Aggregate) -> exp.Expression:
    """The view's column from the merged partials: counts are 0 over no partials."""
    merged = exp.Column(this=exp.Identifier(this=MERGED.format(index), quoted=True))
    if call.func not in COUNTS:
        return merged
    zero = exp.Coalesce(this=merged, expressions=[exp.Literal.number(0)])
    return exp.Cast(this=zero, to=exp.DataType.build(node.schema.type_of(call.name)))
