"""Event-time ASOF JOIN (DuckDB's): each left row with its nearest right row in time.

Meaning: for each left row l (with its multiplicity), the right row r with the same
equality keys whose time is the nearest one on the side ``op`` allows
(``l.t >= r.t``: the latest r.t not after l.t; ``>``: strictly before; ``<=``: the
earliest r.t not before l.t; ``<``: strictly after). Inner: a left row without such an
r is dropped; ``outer`` (ASOF LEFT JOIN): it is kept with NULL right columns. NULL
keys or times never match. **Ties**: where several right rows share the nearest time
(DuckDB picks one of them arbitrarily), ivm takes the first by the right row's other
columns in order, ascending, NULLs last; copies of one right row match once.

Incremental form (``IncrementalAsOfJoin``), a per-key recompute on the *affected* left
rows only: those of the change on the left, and, for each right row the change inserts
or deletes at (k, t), the left rows of key k whose time lies between t and its next
live right time of k on the side matches lie (old or new): only those can have that
row as their match before or after. The change is ASOF(affected ∩ L_new, R_new) −
ASOF(affected ∩ L_old, R_old), both evaluated by DuckDB's own ASOF JOIN over a time
window of the affected keys' right rows (``ivm.operators.asof_reads``). A first load
(both traces empty) is one ASOF JOIN of the changes; an epoch that changes only the
left side is the ASOF JOIN of the left change (the join is linear in its left).
Where the executor keeps memory between epochs (embedded mode), the same rows are found
by binary search in both sides' time indexes instead, and read by equality
(``ivm.operators.asof_indexed``). State: none of its own (both inputs' integrals; in
memory, embedded, each side's live (key, time) points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.asof_indexed import build_sides, indexable, indexed_change, kept_sides
from ivm.operators.asof_reads import deduplicated_right_sql, neighbours_sql, window_sql
from ivm.operators.base import Operator, Run
from ivm.operators.difference import negated_sql
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, empty_relation, null_safe_match, union_all_sql
from ivm.schema import quote

FLIPPED = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
"""The comparison seen from the other side (``a >= b`` is ``b <= a``)."""


@dataclass(frozen=True, eq=False)
class AsOfJoin(Plan):
    """``left`` ASOF [LEFT] JOIN ``right`` ON keys AND ``left_time op right_time``.

    ``keys`` pairs left and right columns that must be equal; output columns are the
    left's, then the right's (all names distinct)."""

    left: Plan
    right: Plan
    keys: tuple[tuple[str, str], ...]
    left_time: str
    op: str
    right_time: str
    outer: bool

    def __post_init__(self) -> None:
        if self.op not in FLIPPED:
            raise ValueError(f"an ASOF join compares with >=, >, <= or <, not {self.op!r}")

    def plain(self, inputs: Sequence[str]) -> str:
        left, right = inputs
        return self.asof_sql(left, deduplicated_right_sql(self, right, weighted=False), False)

    def describe(self) -> str:
        kind = "ASOF LEFT JOIN" if self.outer else "ASOF JOIN"
        return f"{kind} on {self.condition_sql('l', 'r')}"

    def condition_sql(self, left: str, right: str) -> str:
        """The ON condition over relations aliased ``left`` and ``right``."""
        terms = [f"{left}.{quote(a)} = {right}.{quote(b)}" for a, b in self.keys]
        terms.append(
            f"{left}.{quote(self.left_time)} {self.op} {right}.{quote(self.right_time)}"
        )
        return " AND ".join(terms)

    def asof_sql(self, left: str, right: str, weighted: bool) -> str:
        """DuckDB's ASOF JOIN of ``left`` (weighted: its weight is the output's) and
        ``right`` (one row per key and time, no weight)."""
        kind = "ASOF LEFT JOIN" if self.outer else "ASOF JOIN"
        columns = column_list(self.left.schema.names, "__l")
        columns += ", " + column_list(self.right.schema.names, "__r")
        if weighted:
            columns += f", __l.{W}"
        return (
            f"SELECT {columns} FROM ({left}) AS __l {kind} ({right}) AS __r "
            f"ON {self.condition_sql('__l', '__r')}"
        )


@dataclass(frozen=True, eq=False)
class IncrementalAsOfJoin(Operator):
    """ASOF JOIN recomputed on the left rows a change can affect (module docstring)."""

    kind = "asof_join"

    @property
    def asof(self) -> AsOfJoin:
        """The plan node."""
        assert isinstance(self.node, AsOfJoin)
        return self.node

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        keys = self.asof.keys
        return tuple(a for a, _ in keys), tuple(b for _, b in keys)

    def reads_integrals(self) -> tuple[bool, ...]:
        return (True, True)

    def label(self) -> str:
        return (
            f"IncrementalAsOfJoin {self.asof.describe()} (recomputes the left rows a change "
            "can affect; state: the inputs' integrals)"
        )

    def integral(self, run: Run) -> str:
        node = self.asof
        left, right = (run.integral(i) for i in self.inputs)
        return node.asof_sql(left, deduplicated_right_sql(node, right, weighted=True), True)

    def change(self, run: Run) -> str | None:
        left_change, right_change = (run.change(i) for i in self.inputs)
        if left_change is None and right_change is None:
            return None
        node = self.asof
        memory = run.memory(self)
        sides = kept_sides(memory) if memory else None
        # Both traces empty (a view defined before its rows): the whole join, once. An
        # index with points says they are not, without a query.
        if run.backfill or (not (sides and len(sides.left) + len(sides.right))
                            and self._first_load(run)):
            if memory is not None:
                memory.clear()
                if indexable(node) and not run.backfill:  # built now, not by the next epoch
                    run.after_commit(lambda: build_sides(self, node, run, memory))
            left = left_change or empty_relation(node.left.schema)
            right = right_change or empty_relation(node.right.schema)
            return node.asof_sql(left, deduplicated_right_sql(node, right, True), True)
        if memory is not None and indexable(node):
            change = indexed_change(self, node, run, memory, sides, left_change, right_change)
            if change is not False:
                return change
        left_old, right_old = (run.integral(i) for i in self.inputs)
        if right_change is None and left_change is not None:
            # The right side stands still: each left row's match is fixed, so the join is
            # linear in the left and the change is the left change's own matches.
            return run.materialize(self, "output", self._matches_sql(left_change, right_old))
        affected = run.materialize(self, "affected", self._affected_sql(
            left_change, right_change, left_old, right_old
        ))
        if run.is_empty(affected):
            return None
        lnames = node.left.schema.names
        # The affected rows there before, read once: after the epoch they are those plus
        # the left change (whose rows are all affected).
        old_rows = (
            f"SELECT * FROM ({left_old}) AS __a SEMI JOIN ({affected}) AS __f "
            f"ON {null_safe_match(lnames, '__a', '__f')}"
        )
        new_rows = _with("SELECT * FROM __old_rows", left_change)
        shared = f"WITH __old_rows AS MATERIALIZED ({old_rows})"
        if node.keys:  # the right rows of the affected keys, read once for both sides
            on = " AND ".join(f"__b.{quote(b)} = __k.{quote(a)}" for a, b in node.keys)
            shared += (
                f", __right_old AS MATERIALIZED (SELECT * FROM ({right_old}) AS __b SEMI JOIN "
                f"(SELECT DISTINCT {column_list([a for a, _ in node.keys])} FROM "
                f"({affected})) AS __k ON {on})"
            )
            right_old = "SELECT * FROM __right_old"
        new = self._matches_sql(new_rows, _with(right_old, right_change))
        old = self._matches_sql("SELECT * FROM __old_rows", right_old)
        return run.materialize(self, "output", (
            f"{shared} " + union_all_sql([new, negated_sql(old)])
        ))

    def _matches_sql(self, rows: str, right: str) -> str:
        """Z-set ``rows`` (left rows) joined with their matches in Z-set ``right``, reading
        only the window of ``right`` that can hold them (``asof_reads.window_sql``)."""
        node = self.asof
        window = window_sql(right, "SELECT * FROM __rows", node.keys, node.left_time,
                            node.op, node.right_time)
        return f"WITH __rows AS MATERIALIZED ({rows}) " + node.asof_sql(
            "SELECT * FROM __rows", deduplicated_right_sql(node, window, True), True
        )

    def _first_load(self, run: Run) -> bool:
        """Whether both inputs' traces are empty (a view defined before its tables' rows
        arrived): then the change is the whole join of the changes, with nothing to undo."""
        left, right = (run.integral(i) for i in self.inputs)
        return bool(run.value(self, (
            f"SELECT NOT EXISTS (SELECT 1 FROM ({left})) AND NOT EXISTS (SELECT 1 FROM ({right}))"
        )))

    def _affected_sql(
        self,
        left_change: str | None,
        right_change: str | None,
        left_old: str,
        right_old: str,
    ) -> str:
        """Distinct left rows whose output may change (see the module docstring): the left
        change's rows, and the rows there before whose time lies where a right change
        can move their match (a row the epoch adds is in the left change already)."""
        node = self.asof
        lnames = node.left.schema.names
        parts = []
        if left_change is not None:
            parts.append(f"SELECT {column_list(lnames)} FROM ({left_change}) AS __d")
        if right_change is not None:
            intervals = neighbours_sql(
                right_old, right_change, [b for _, b in node.keys], node.right_time, node.op
            )
            match = " AND ".join(
                f"__l.{quote(a)} = __i.{quote(b)}" for a, b in node.keys
            ) or "true"
            lt = f"__l.{quote(node.left_time)}"
            parts.append(
                f"SELECT {column_list(lnames, '__l')} FROM ({left_old}) AS __l "
                f"JOIN ({intervals}) AS __i ON {match} "
                f"WHERE (__i.__lo IS NULL OR {lt} >= __i.__lo) "
                f"AND (__i.__hi IS NULL OR {lt} <= __i.__hi)"
            )
        return " UNION ".join(f"SELECT * FROM ({p}) AS __p{i}" for i, p in enumerate(parts))


def _with(old: str, change: str | None) -> str:
    return old if change is None else union_all_sql([old, change])
