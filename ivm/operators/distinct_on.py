"""DISTINCT ON (DuckDB's): per key, the first row by an order, as a per-key arg-min.

Meaning: for each distinct value of the ``keys`` columns among the input's rows
(NULL equal to NULL), one output row with weight 1: the key's first row by
``order`` (the query's ORDER BY, as DuckDB picks it), ties (and a query without
ORDER BY, where DuckDB picks any row) broken by the input's remaining columns
(every column not in the keys or the order, in input order, ascending, NULLs
last), so only identical rows stay tied, and any of them is the same row.

Incremental form: the per-key operator (``ivm.operators.per_key``) keyed by the
DISTINCT ON columns: for each key the change touches, the first of its live rows
(weights do not matter: copies are equal), minus what the output held for it.

State: the per-key operator's: the input's rows and the output (one row per key),
by key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.aggregate import SortKey
from ivm.operators.per_key import PerKey
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list


@dataclass(frozen=True, eq=False)
class DistinctOn(Plan):
    """The first row of ``input`` per value of ``keys`` (input columns) by ``order``."""

    input: Plan
    keys: tuple[str, ...]
    order: tuple[SortKey, ...]

    @property
    def ranking(self) -> tuple[SortKey, ...]:
        """``order``, then the remaining columns: the deterministic order that picks a row."""
        ordered = set(self.keys) | {k.column for k in self.order}
        return self.order + tuple(SortKey(c) for c in self.input.schema.names
                                  if c not in ordered)

    def plain(self, inputs: Sequence[str]) -> str:
        return first_rows_sql(inputs[0], self)

    def describe(self) -> str:
        order = ", ".join(k.sql() for k in self.ranking)
        return f"DistinctOn [{', '.join(self.keys)}] first by [{order}]"


def first_rows_sql(source: str, node: DistinctOn) -> str:
    """The first row of ``source`` (rows with ``node``'s input columns) per key."""
    ranking = node.ranking
    order = " ORDER BY " + ", ".join(k.sql() for k in ranking) if ranking else ""
    names = node.input.schema.names
    return (
        f"SELECT DISTINCT ON ({column_list(node.keys)}) {column_list(names)} "
        f"FROM ({source}) AS __in{order}"
    )


@dataclass(frozen=True, eq=False)
class FirstPerKey(PerKey):
    """DISTINCT ON: each touched key's first live row, recomputed."""

    kind = "distinct_on"

    @property
    def distinct_on(self) -> DistinctOn:
        """The plan node."""
        assert isinstance(self.node, DistinctOn)
        return self.node

    @property
    def keys(self) -> tuple[str, ...]:
        return self.distinct_on.keys

    def group_sql(self, live: str) -> str:
        rows = first_rows_sql(live, self.distinct_on)
        return f"SELECT {column_list(self.schema.names)}, 1::BIGINT AS {W} FROM ({rows}) AS f"

    def label(self) -> str:
        return (
            f"FirstPerKey {self.distinct_on.describe()} (per touched key; state is the input's "
            "rows and the output, by key)"
        )
