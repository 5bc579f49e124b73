"""WITH RECURSIVE: the plan of one recursive common table expression.

Meaning, as DuckDB evaluates it (a *working table* W per iteration):

* ``UNION ALL``: W₀ = anchor; Wⱼ₊₁ = step(Wⱼ); the result is W₀ ⊎ W₁ ⊎ … (a bag).
  Every reference to the CTE inside ``step`` reads Wⱼ, the rows the previous
  iteration produced, not the result so far: a term joining the CTE with itself
  joins Wⱼ with Wⱼ.
* ``UNION``: W₀ = distinct(anchor); Wⱼ₊₁ = the distinct rows of step(Wⱼ) not in
  W₀ ∪ … ∪ Wⱼ; the result is their union, each row once. Equivalently: a row's
  *birth* is the first iteration whose derivations Nⱼ (N₀ = anchor, Nⱼ₊₁ =
  step(Wⱼ)) contain it, and Wⱼ holds the rows born at j.

Evaluation stops at the first empty working table. The incremental form,
``ivm.operators.fixed_point``, maintains these iterations under changes of
the anchor and of the relations ``step`` reads.

The plan keeps ``step`` out of its children (it is a ``Body``): the parent plan
reads the anchor and the *imports*, the largest parts of ``step`` that do not
read the CTE (a base table, a join of two views…), which ``step`` reads through
``Imported`` leaves; ``Feedback`` is its reference to the CTE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.plan.node import Plan
from ivm.plan.sql import column_list, empty_relation
from ivm.schema import Column, Schema, quote

ITER = "__ivm_iter"
"""The column holding a working-table row's iteration inside a fixed point."""

ITER_COLUMN = Column(ITER, "BIGINT")


def tagged_schema(schema: Schema) -> Schema:
    """``schema`` with the iteration column last."""
    return Schema((*schema.columns, ITER_COLUMN))


@dataclass(frozen=True, eq=False)
class Feedback(Plan):
    """The recursive CTE ``name`` read inside its own step: the previous iteration's
    working table (with its iteration number ``__ivm_iter`` once ``tagged``)."""

    name: str
    tagged: bool = False

    def plain(self, inputs: Sequence[str]) -> str:
        # For typing the step's nodes; its Recursive node renders the CTE reference.
        return empty_relation(self.schema, weighted=False)

    def describe(self) -> str:
        return f"Feedback {self.name} (the previous iteration's new rows)"


@dataclass(frozen=True, eq=False)
class Imported(Plan):
    """Import ``index`` of the enclosing recursion: a relation the step reads that does not
    depend on the recursion (constant across iterations, changing across epochs)."""

    index: int

    def plain(self, inputs: Sequence[str]) -> str:
        # Its Recursive node renders the import itself (``render_step``); this is for typing.
        return empty_relation(self.schema, weighted=False)

    def describe(self) -> str:
        return f"Import #{self.index} (from the enclosing circuit)"


@dataclass(frozen=True)
class Body:
    """The step of a recursion: a plan over ``Feedback`` and ``Imported`` leaves (held apart
    so that the enclosing plan does not read it as a child)."""

    plan: Plan


@dataclass(frozen=True, eq=False)
class Recursive(Plan):
    """The recursive CTE ``name``: ``anchor`` UNION [ALL] ``step`` iterated to a fixed point.

    ``imports[i]`` is what the step's ``Imported(i)`` leaf reads; the schema is the
    anchor's (DuckDB casts each iteration's rows to it).
    """

    anchor: Plan
    imports: tuple[Plan, ...]
    step: Body
    name: str
    union_all: bool

    def plain(self, inputs: Sequence[str]) -> str:
        anchor, imports = inputs[0], inputs[1:]
        step = render_step(self.step.plan, imports)
        names = column_list(self.schema.names)
        union = "UNION ALL" if self.union_all else "UNION"
        return (
            f"SELECT {names} FROM (WITH RECURSIVE {cte_name(self.name)}({names}) AS "
            f"(SELECT * FROM ({anchor}) AS __anchor {union} SELECT * FROM ({step}) AS __step) "
            f"SELECT * FROM {cte_name(self.name)}) AS __recursive"
        )

    def describe(self) -> str:
        kind = "UNION ALL" if self.union_all else "UNION"
        return f"Recursive {self.name} (anchor {kind} step, to a fixed point)"


def cte_name(name: str) -> str:
    """The quoted name plain SQL gives the recursive CTE ``name`` (never a table's name)."""
    return quote(f"__ivm_recursive_{name}")


def render_step(step: Plan, imports: Sequence[str]) -> str:
    """Plain SQL of a recursion's step, its ``Imported`` leaves reading ``imports``."""
    rendered: dict[int, str] = {}
    for node in step.walk():
        if isinstance(node, Imported):
            rendered[id(node)] = imports[node.index]
        elif isinstance(node, Feedback):
            names = column_list(node.schema.names)
            rendered[id(node)] = f"SELECT {names} FROM {cte_name(node.name)}"
        else:
            rendered[id(node)] = node.plain([rendered[id(c)] for c in node.children()])
    return rendered[id(step)]


def split_imports(step: Plan) -> tuple[Plan, tuple[Plan, ...]]:
    """``step`` with each largest part that does not read its ``Feedback`` replaced by an
    ``Imported`` leaf, and those parts in leaf-index order (equal parts once)."""
    reads: dict[int, bool] = {}
    for node in step.walk():
        reads[id(node)] = isinstance(node, Feedback) or any(
            reads[id(c)] for c in node.children()
        )
    imports: list[Plan] = []
    index: dict[str, int] = {}
    rebuilt: dict[int, Plan] = {}

    def rebuild(node: Plan) -> Plan:
        if id(node) in rebuilt:
            return rebuilt[id(node)]
        if not reads[id(node)]:
            position = index.setdefault(node.fingerprint(), len(imports))
            if position == len(imports):
                imports.append(node)
            result: Plan = Imported(schema=node.schema, index=position)
        else:
            result = node.with_children([rebuild(c) for c in node.children()])
        rebuilt[id(node)] = result
        return result

    return rebuild(step), tuple(imports)
