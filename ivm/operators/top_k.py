"""ORDER BY … LIMIT n OFFSET m: the rows ranked m+1 … m+n of the input.

Meaning: sort the input's copies by the ``order`` keys, then by every input column
left to right (ascending, NULLS LAST), and keep copies m+1 … m+n: a row of
weight w whose copies occupy ranks (s, s + w] keeps weight
max(0, min(s + w, m + n) − max(s, m)). The tie-break makes the answer
deterministic where DuckDB's own LIMIT picks among ties arbitrarily: rows that
tie on every column are copies of one row, so any choice among them is the same.

State (the operator is global: it runs in one place; in Spark mode per partition,
merged by a global one: ``ivm.passes.split_top_k``):

* ``top``: a *prefix* of the input in that order: every input row up to its last
  row, with its full weight, and at least the K = m + n copies the output needs
  (or the whole input when that holds fewer);
* ``size``: the input's total weight (one row), which says whether ``top`` is the
  whole input.

The input's own rows are not copied: a refill reads the input's integral (a base
table's trace, an aggregate's groups…), as a join reads its inputs'.

Per epoch, with Δ the consolidated input change: the deletions in Δ and the best
``kept`` insertions (kept = 2K + ``SLACK``: so deletions rarely empty the prefix)
merge with ``top``; rows up to the old prefix's last row stay exact, so the new
prefix is the merged rows up to that row (all of them when ``top`` was the whole
input), cut back to ``kept`` copies. Only when deletions leave fewer than K copies in
a prefix that is not the whole input is the prefix read again from the input's
integral (a *refill*: the input's best ``kept`` rows, one top-n scan). The output change is
the window (m, m + n] of the new prefix minus that of the old: a change touches
what can enter or leave the top n, and a deletion from the top n promotes the next
row from the prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.aggregate import SortKey
from ivm.operators.base import Operator, Run, TraceSpec
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import Column, Schema

TOP = "top"
SIZE = "size"
SIZE_SCHEMA = Schema((Column("__all", "BOOLEAN"),))
"""The size trace: one constant column; its weight is the input's total weight."""
SLACK = 100
"""Copies kept beyond 2K, so that deletions rarely leave the prefix short (tests lower it
to make refills frequent)."""


@dataclass(frozen=True, eq=False)
class TopK(Plan):
    """The input's rows ranked ``offset`` + 1 … ``offset`` + ``limit`` by ``order``,
    ties broken by every input column (ascending, NULLS LAST)."""

    input: Plan
    order: tuple[SortKey, ...]
    limit: int
    offset: int = 0
    local: bool = False
    """Partitioned execution only: the top ``limit`` rows of each partition of the input
    (hashed by whole row), which a global TopK above merges (``ivm.passes.split_top_k``).
    Its meaning in one place is the plain top ``limit``."""

    @property
    def order_sql(self) -> str:
        """The total order: the ORDER BY terms, then every column as a tie-break."""
        ties = [SortKey(name).sql() for name in self.input.schema.names]
        return ", ".join([k.sql() for k in self.order] + ties)

    def plain(self, inputs: Sequence[str]) -> str:
        offset = f" OFFSET {self.offset}" if self.offset else ""
        return (
            f"SELECT * FROM ({inputs[0]}) AS __in ORDER BY {self.order_sql} "
            f"LIMIT {self.limit}{offset}"
        )

    def describe(self) -> str:
        terms = ", ".join(k.sql() for k in self.order)
        offset = f" OFFSET {self.offset}" if self.offset else ""
        local = " in each partition" if self.local else ""
        return f"TopK{local} ORDER BY {terms} LIMIT {self.limit}{offset}"


@dataclass(frozen=True, eq=False)
class IncrementalTopK(Operator):
    """ORDER BY … LIMIT: a prefix of the input kept in order, refilled when emptied."""

    kind = "top_k"

    @property
    def top_k(self) -> TopK:
        """The plan node."""
        assert isinstance(self.node, TopK)
        return self.node

    @property
    def needed(self) -> int:
        """K: the copies the output window reaches down to."""
        return self.top_k.limit + self.top_k.offset

    @property
    def kept(self) -> int:
        """The copies the prefix is cut back to (K plus slack for deletions)."""
        return 2 * self.needed + SLACK

    def traces(self) -> tuple[TraceSpec, ...]:
        order = tuple(k.column for k in self.top_k.order)
        return (
            TraceSpec(TOP, self.schema, order),
            TraceSpec(SIZE, SIZE_SCHEMA, ()),
        )

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (tuple(self.schema.names) if self.top_k.local else (),)

    def reads_integrals(self) -> tuple[bool, ...]:
        return (True,)

    def change(self, run: Run) -> str | None:
        delta = run.change(self.inputs[0])
        if delta is None:
            return None
        names = self.schema.names
        change = run.materialize(self, "delta", consolidate_sql(delta, names))
        top, size = run.read(self, TOP), run.read(self, SIZE)
        prefix = run.materialize(self, "prefix", self._merged_prefix_sql(change, top, size))
        if run.value(self, self._refill_needed_sql(prefix, change, size)):
            refill = self._refill_sql(run.integral(self.inputs[0]), change)
            prefix = run.materialize(self, "prefix", refill)
        old = self._prefix_sql(top)
        output = run.materialize(self, "output", consolidate_sql(
            f"{self._window_sql(prefix)} UNION ALL "
            f"SELECT {column_list(names)}, -{W} FROM ({self._window_sql(old)}) AS o",
            names,
        ))
        run.append(self, SIZE, f"SELECT true AS __all, SUM({W})::BIGINT AS {W} "
                               f"FROM ({change}) AS c HAVING SUM({W}) <> 0")
        # Only the prefix's difference is appended, so the trace stays near its size.
        run.append(self, TOP, consolidate_sql(
            f"SELECT {column_list(names)}, {W} FROM ({prefix}) AS p UNION ALL "
            f"SELECT {column_list(names)}, -{W} FROM ({old}) AS o",
            names,
        ))
        return output

    def integral(self, run: Run) -> str:
        return self._window_sql(self._prefix_sql(run.read(self, TOP)))

    def label(self) -> str:
        where = "partitioned by whole row" if self.top_k.local else "global: one partition"
        return (
            f"{self.top_k.describe()} (state: an ordered prefix of at least {self.needed} and "
            f"at most {self.kept} copies, the input's size; refills read the input's integral; "
            f"{where})"
        )

    # -- SQL ---------------------------------------------------------------------------------

    def _prefix_sql(self, top: str) -> str:
        """The stored prefix (``top``: its trace's rows), consolidated."""
        return consolidate_sql(top, self.schema.names, positive_only=True)

    def _merged_prefix_sql(self, change: str, top: str, size: str) -> str:
        """The new prefix from the old one and the change, valid unless it holds fewer
        than K copies and is not the whole input (then ``_refill_sql``)."""
        cols = column_list(self.schema.names)
        order = self.top_k.order_sql
        whole = (
            f"(SELECT COALESCE(SUM({W}), 0) FROM old) >= "
            f"(SELECT COALESCE(SUM({W}), 0) FROM ({size}) AS __s)"
        )
        return (
            f"WITH old AS ({self._prefix_sql(top)}), "
            f"ins AS (SELECT {cols}, {W} FROM ({change}) AS c WHERE {W} > 0 "
            f"ORDER BY {order} LIMIT {self.kept}), "
            f"u AS (SELECT {cols}, SUM({W})::BIGINT AS {W}, BOOL_OR(__ivm_old) AS __ivm_old FROM ("
            f"SELECT {cols}, {W}, true AS __ivm_old FROM old "
            f"UNION ALL SELECT {cols}, {W}, false FROM ({change}) AS c WHERE {W} < 0 "
            f"UNION ALL SELECT {cols}, {W}, false FROM ins) AS m GROUP BY {cols}), "
            f"r AS (SELECT *, ROW_NUMBER() OVER (ORDER BY {order}) AS __ivm_pos FROM u), "
            f"p AS (SELECT * FROM r WHERE {W} > 0 AND ({whole} OR __ivm_pos <= "
            f"(SELECT MAX(__ivm_pos) FROM r WHERE __ivm_old))), "
            f"q AS (SELECT *, SUM({W}) OVER (ORDER BY __ivm_pos ROWS UNBOUNDED PRECEDING) - {W} "
            f"AS __ivm_start FROM p) "
            f"SELECT {cols}, {W} FROM q WHERE __ivm_start < {self.kept}"
        )

    def _refill_needed_sql(self, prefix: str, change: str, size: str) -> str:
        """True when the merged prefix holds fewer than K copies and not the whole input."""
        held = f"(SELECT COALESCE(SUM({W}), 0) FROM ({prefix}) AS p)"
        total = (
            f"(SELECT COALESCE(SUM({W}), 0) FROM ({size}) AS __s) + "
            f"(SELECT COALESCE(SUM({W}), 0) FROM ({change}) AS c)"
        )
        return f"SELECT {held} < {self.needed} AND {held} < {total}"

    def _refill_sql(self, integral: str, change: str) -> str:
        """The prefix read again from the input after the change (its best rows)."""
        names = self.schema.names
        cols = column_list(names)
        live = consolidate_sql(
            f"SELECT {cols}, {W} FROM ({integral}) AS i "
            f"UNION ALL SELECT {cols}, {W} FROM ({change}) AS c",
            names,
            positive_only=True,
        )
        order = self.top_k.order_sql
        return (
            f"WITH best AS (SELECT * FROM ({live}) AS l ORDER BY {order} LIMIT {self.kept}), "
            f"q AS (SELECT *, SUM({W}) OVER (ORDER BY {order} ROWS UNBOUNDED PRECEDING) - {W} "
            f"AS __ivm_start FROM best) "
            f"SELECT {cols}, {W} FROM q WHERE __ivm_start < {self.kept}"
        )

    def _window_sql(self, prefix: str) -> str:
        """The output rows of a prefix: copies ranked offset + 1 … offset + limit."""
        cols = column_list(self.schema.names)
        low, high = self.top_k.offset, self.needed
        taken = f"GREATEST(LEAST(__ivm_start + {W}, {high}) - GREATEST(__ivm_start, {low}), 0)"
        return (
            f"SELECT {cols}, {taken}::BIGINT AS {W} FROM (SELECT {cols}, {W}, "
            f"SUM({W}) OVER (ORDER BY {self.top_k.order_sql} ROWS UNBOUNDED PRECEDING) - {W} "
            f"AS __ivm_start FROM ({prefix}) AS p) AS s WHERE {taken} > 0"
        )
