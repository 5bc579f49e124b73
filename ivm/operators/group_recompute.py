"""GROUP BY recomputed per touched group: the aggregate as a user of the per-key operator.

Meaning: as ``ivm.operators.aggregate``. Used when some call has neither an
invertible nor a running form (DISTINCT calls, medians, lists, VAR of DOUBLE…;
MIN/MAX and float sums beside only invertible calls are a ``RunningAggregate``):
f(group) is the aggregate of the group's live rows, one output row per group (a
global aggregate's one row even over no rows).

Calls are evaluated over the live rows weighted (``SUM(x · __w)``, ``MIN(x)``…)
when every call has a weighted form, else over the rows expanded into copies.

State: the per-key operator's (the input's rows and the output, by group key).
"""

from __future__ import annotations

from dataclasses import dataclass

from ivm.errors import IvmError, UnsupportedSQL
from ivm.functions.aggregates import weighted_sql
from ivm.operators.aggregate import Aggregate, AggregateCall, grouped_sql
from ivm.operators.base import Describe, Operator
from ivm.operators.per_key import PerKey
from ivm.plan.sql import W, column_list, empty_relation, expand_sql, quote


@dataclass(frozen=True, eq=False)
class GroupRecompute(PerKey):
    """An aggregate whose touched groups are recomputed from their live rows."""

    kind = "aggregate_per_key"

    @property
    def aggregate(self) -> Aggregate:
        """The aggregate's plan node."""
        assert isinstance(self.node, Aggregate)
        return self.node

    @classmethod
    def build(
        cls, node: Aggregate, inputs: tuple[Operator, ...], describe: Describe
    ) -> GroupRecompute:
        """The operator, once DuckDB has accepted its per-group SQL for the input's types
        (UnsupportedSQL, at CREATE VIEW, if not: never a failure at some later epoch)."""
        op = cls(node, inputs)
        try:
            describe(op.group_sql(empty_relation(node.input.schema)))
        except IvmError as error:
            calls = ", ".join(c.sql() for c in node.calls)
            raise UnsupportedSQL(
                f"GROUP BY computing {calls}: its per-group recomputation is not supported "
                f"for these argument types ({error})"
            ) from error
        return op

    @property
    def keys(self) -> tuple[str, ...]:
        return self.aggregate.keys

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (self.aggregate.partition_key,)

    def output_key(self) -> tuple[str, ...] | None:
        return self.output_keys if self.aggregate.partition_key == self.keys else None

    def group_sql(self, live: str) -> str:
        node = self.aggregate
        weighted = [_weighted(call, node) for call in node.calls]
        if all(w is not None for w in weighted):
            values = [w for w in weighted if w is not None]
            source = live
        else:
            values = [call.sql(node.types(call)) for call in node.calls]
            source = expand_sql(live, node.input.schema.names)
        typed = [
            f"CAST({v} AS {node.schema.type_of(c.name)})"
            for v, c in zip(values, node.calls, strict=True)
        ]
        rows = grouped_sql(source, node.keys, typed, node.calls)
        return f"SELECT {column_list(node.schema.names)}, 1::BIGINT AS {W} FROM ({rows}) AS g"

    def label(self) -> str:
        node = self.aggregate
        calls = ", ".join(c.describe() for c in node.calls)
        return (
            f"GroupRecompute {node.grouping()} {calls} "
            "(per key: state is the input's rows and the output, by group key)"
        )


def _weighted(call: AggregateCall, node: Aggregate) -> str | None:
    """``call`` over weighted live rows, or None when it needs every copy."""
    if call.distinct:  # copies do not matter to a DISTINCT call
        return call.sql()
    condition = quote(call.filter) if call.filter else None
    types = [node.input.schema.type_of(a) for a in call.args]
    return weighted_sql(call.function, [quote(a) for a in call.args], types, condition)
