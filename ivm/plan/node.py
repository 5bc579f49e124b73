"""The logical plan: relational algebra over bags, with a schema on every node.

The SQL front end builds plan nodes; ``ivm.circuit.incrementalize`` turns them
into an incremental circuit. Each kind of node is defined in the module of its
operator (``ivm.operators.<kind>``), beside its incremental form; this module
holds what every node shares:

* ``children()`` / ``with_children()``: the nodes it reads, found generically
  from its dataclass fields (a ``Plan`` or a tuple of them), so a pass can
  rebuild any node without knowing its kind;
* ``fingerprint()``: a stable hash of the node's kind, schema, parameters and
  children's fingerprints. Equal fingerprints mean equal relations; state is
  named by it, so it must never depend on object identity or walk order;
* ``plain()``: the node's ordinary (bag) SQL given its inputs' SQL, which
  ``plain_sql`` composes into the non-incremental query of a whole plan (how
  DuckDB types each node, and a second oracle for the planner).

Nodes are immutable and compared by identity, so a plan is a DAG: a CTE used
twice is one node with two parents. Column references inside scalar
expressions are sqlglot ``Column`` nodes naming a column of the node's input;
the executor renders them to DuckDB SQL. There is no second expression language.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlglot import exp

from ivm.plan.sql import sql_of
from ivm.schema import Schema


@dataclass(frozen=True, eq=False)
class Plan:
    """Base class of plan nodes. ``schema`` names and types the output columns."""

    schema: Schema

    # -- structure ---------------------------------------------------------------------------

    def children(self) -> tuple[Plan, ...]:
        """The nodes this node reads, in field order."""
        found: list[Plan] = []
        for name in self._child_fields:
            value = getattr(self, name)
            found.extend(value if isinstance(value, tuple) else (value,))
        return tuple(found)

    def with_children(self, children: Sequence[Plan]) -> Plan:
        """This node reading ``children`` instead (same count and order as ``children()``)."""
        children = tuple(children)
        if len(children) != len(self.children()):
            raise ValueError(f"{type(self).__name__} reads {len(self.children())} inputs")
        if all(a is b for a, b in zip(children, self.children(), strict=True)):
            return self
        changes: dict[str, Any] = {}
        position = 0
        for name in self._child_fields:
            value = getattr(self, name)
            if isinstance(value, tuple):
                changes[name] = children[position : position + len(value)]
                position += len(value)
            else:
                changes[name] = children[position]
                position += 1
        return dataclasses.replace(self, **changes)

    @property
    def _child_fields(self) -> list[str]:
        return [
            f.name
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Plan)
            or (
                isinstance(getattr(self, f.name), tuple)
                and getattr(self, f.name)
                and all(isinstance(v, Plan) for v in getattr(self, f.name))
            )
        ]

    def walk(self) -> Iterator[Plan]:
        """Every node of the DAG below and including this one, each once, inputs first."""
        seen: set[int] = set()

        def visit(node: Plan) -> Iterator[Plan]:
            if id(node) in seen:
                return
            seen.add(id(node))
            for child in node.children():
                yield from visit(child)
            yield node

        yield from visit(self)

    def sources(self) -> frozenset[str]:
        """Names of the base tables and views this plan reads (its leaves' names)."""
        return frozenset(n.source_name for n in self.walk() if n.source_name is not None)

    @property
    def source_name(self) -> str | None:
        """The table or view a leaf node reads; None for every other node."""
        return None

    # -- identity ----------------------------------------------------------------------------

    def fingerprint(self) -> str:
        """A stable hex digest of what this node computes (kind, schema, parameters, inputs)."""
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:
        children = set(self._child_fields)
        parts = [type(self).__name__, canonical(self.schema)]
        for f in dataclasses.fields(self):
            if f.name != "schema" and f.name not in children:
                parts.append(f"{f.name}={canonical(getattr(self, f.name))}")
        parts += [child.fingerprint() for child in self.children()]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    # -- meaning -----------------------------------------------------------------------------

    def plain(self, inputs: Sequence[str]) -> str:
        """Ordinary (bag) SQL of this node over its inputs, given as SQL text."""
        raise NotImplementedError(type(self).__name__)

    def describe(self) -> str:
        """One line naming the node and its parameters (for explain)."""
        return type(self).__name__

    def row_expressions(self) -> tuple[exp.Expression, ...]:
        """The scalar expressions this node evaluates on each input row (none by default)."""
        return ()


def plain_sql(plan: Plan) -> str:
    """Non-incremental (bag) SQL of a whole plan; a leaf reads the relation of its name.

    A node read by several others (a CTE used twice, a decorrelated subquery's outer
    rows) is rendered once, as a common table expression, so the text stays linear in
    the size of the plan."""
    readers: dict[int, int] = {}
    for node in plan.walk():
        for child in node.children():
            readers[id(child)] = readers.get(id(child), 0) + 1
    rendered: dict[int, str] = {}
    ctes: list[str] = []
    for node in plan.walk():
        text = node.plain([rendered[id(c)] for c in node.children()])
        if readers.get(id(node), 0) > 1 and node.children():
            name = f"__ivm_p{len(ctes)}"
            ctes.append(f"{name} AS ({text})")
            text = f"SELECT * FROM {name}"
        rendered[id(node)] = text
    if not ctes:
        return rendered[id(plan)]
    return f"WITH {', '.join(ctes)} SELECT * FROM ({rendered[id(plan)]}) AS __ivm_plain"


def canonical(value: object) -> str:
    """Text that identifies ``value`` across processes (for fingerprints)."""
    if isinstance(value, exp.Expression):
        return sql_of(value)
    if isinstance(value, Schema):
        return "(" + ",".join(f"{c.name}:{c.type}" for c in value.columns) + ")"
    if isinstance(value, Plan):
        return value.fingerprint()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(
            f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value)
        )
        return f"{type(value).__name__}({fields})"
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return repr(value)
    raise TypeError(f"no canonical form for {type(value).__name__}")
