"""Cut a circuit into stages for a partitioned executor (Spark mode).

A *stage* is one stateful operator (a join, an aggregate, a DISTINCT), or the
store of a base table or of a view's output, together with the key its inputs
are partitioned by. Changes between stages are repartitioned by that key, so
every partition of a stage sees all rows of its keys and keeps state for them
alone; linear operators (filter, project, UNION ALL) between stages need no
state and run on the changes as they flow (on any partitioning).

Keys, and the choice for operators with no natural key:

* a join: its equi-keys (``a = b`` across the two inputs, after
  ``ivm.binary_joins`` made every join binary). Without one (a cross product,
  or only equalities between different kinds of types) the join runs on one
  partition;
* GROUP BY: the group keys; a global aggregate (no GROUP BY) runs on one
  partition;
* DISTINCT, a view's output, and a base table without a primary key: the whole
  row; a base table with a primary key: the key.

Each stage keeps the integral of an input only when its operator reads it
(a join reads both; an aggregate only for MIN/MAX or float sums).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ivm.circuit import (
    Circuit,
    DeltaJoin,
    IncrementalAggregate,
    IncrementalDistinct,
    Operator,
    Source,
)
from ivm.errors import UnsupportedSQL
from ivm.plan import Scan
from ivm.schema import Schema, TableSchema
from ivm.wire import wire_type, wire_types


@dataclass(frozen=True)
class StageInput:
    """One input of a stage: whose change it is, and how it is partitioned."""

    schema: Schema
    key: tuple[str, ...]  # columns hashed to pick the partition; () means one partition
    kept: bool  # the stage keeps this input's integral (its trace ``in<i>``)
    stream: Operator | None = None  # the view-circuit operator producing it (None: a table)


@dataclass(frozen=True)
class Stage:
    """One stage: its inputs, what it computes, and the change it emits."""

    name: str  # directory name, unique within its view
    kind: str  # "table", "join", "aggregate", "distinct" or "output"
    inputs: tuple[StageInput, ...]
    output: Schema
    circuit: Circuit | None = None  # join/aggregate/distinct: Sources in0.., then the operator
    produces: int | None = None  # index of the view-circuit operator whose change it emits
    table: TableSchema | None = None  # for a table stage

    @property
    def partitioned(self) -> bool:
        """False when the stage runs on a single partition (no key)."""
        return bool(self.inputs[0].key)

    def keys(self) -> dict[str, tuple[str, ...]]:
        """Sort key of each trace, by its name inside a partition (for compaction)."""
        keys = {input_name(i): s.key for i, s in enumerate(self.inputs) if s.kept}
        if self.circuit is not None:
            for op in self.circuit.operators:
                if op.state_key is not None:
                    keys[f"op{op.index}"] = op.state_key
        return keys

    def describe(self) -> str:
        """One line for ``explain``."""
        keys = "; ".join(
            f"in{i} by [{', '.join(s.key)}]" if s.key else f"in{i} on one partition"
            for i, s in enumerate(self.inputs)
        )
        kept = ", ".join(f"in{i}" for i, s in enumerate(self.inputs) if s.kept) or "none"
        return f"{self.name}: {keys}; integrals kept: {kept}"


def input_name(index: int) -> str:
    """Name of a stage's ``index``-th input inside a partition (its Source and trace)."""
    return f"in{index}"


def table_stage(table: TableSchema) -> Stage:
    """The stage storing a base table: partitioned by its primary key, else by the whole row."""
    wire_types(table.schema, f"table {table.name!r}")
    key = table.primary_key or tuple(table.schema.names)
    return Stage(
        name="table",
        kind="table",
        inputs=(StageInput(table.schema, key, kept=True),),
        output=table.schema,
        table=table,
    )


def view_stages(circuit: Circuit) -> list[Stage]:
    """The stages of a view's circuit (made of binary joins), in dependency order.

    The last stage stores the view's output, partitioned by the whole row, so each
    partition consolidates its rows and the view's change is consolidated overall.
    """
    stages = [_operator_stage(op) for op in circuit.operators if op.stateful or _is_join(op)]
    output = circuit.output
    schema = output.node.schema
    stages.append(
        Stage(
            name="output",
            kind="output",
            inputs=(StageInput(schema, tuple(schema.names), kept=True, stream=output),),
            output=schema,
        )
    )
    for stage in stages:
        for i, stage_input in enumerate(stage.inputs):
            wire_types(stage_input.schema, f"view {circuit.view!r}, stage {stage.name} in{i}")
        wire_types(stage.output, f"view {circuit.view!r}, stage {stage.name}")
    return stages


def _is_join(op: Operator) -> bool:
    return isinstance(op, DeltaJoin)


def _operator_stage(op: Operator) -> Stage:
    schemas = [i.node.schema for i in op.inputs]
    if isinstance(op, DeltaJoin):
        kind = "join"
        keys = _join_keys(op, schemas)
        kept = [True] * len(schemas)
    elif isinstance(op, IncrementalAggregate):
        kind = "aggregate"
        keys = [op.shape.keys]
        kept = [bool(op.shape.recomputed)]
    elif isinstance(op, IncrementalDistinct):
        kind = "distinct"
        keys = [tuple(schemas[0].names)]
        kept = [False]
    else:  # pragma: no cover - view_stages selects only the operators above
        raise TypeError(type(op).__name__)
    sources = tuple(
        Source(i, Scan(schema=schema, name=input_name(i)), (), name=input_name(i))
        for i, schema in enumerate(schemas)
    )
    local = replace(op, index=len(sources), inputs=sources)
    inputs = tuple(
        StageInput(schema, key, kept=k, stream=stream)
        for schema, key, k, stream in zip(schemas, keys, kept, op.inputs, strict=True)
    )
    return Stage(
        name=f"s{op.index}-{kind}",
        kind=kind,
        inputs=inputs,
        output=op.node.schema,
        circuit=Circuit(view=f"stage{op.index}", operators=(*sources, local)),
        produces=op.index,
    )


def _join_keys(op: DeltaJoin, schemas: list[Schema]) -> list[tuple[str, ...]]:
    """Per input, the key columns: the equi-pairs whose two sides hash alike."""
    if len(schemas) != 2:  # pragma: no cover - binary_joins runs first
        raise UnsupportedSQL("Spark mode needs binary joins")
    left_names = set(schemas[0].names)
    left, right = [], []
    for a, b in op.equi_keys():
        if a not in left_names:
            a, b = b, a
        if _hash_alike(schemas[0].type_of(a), schemas[1].type_of(b)):
            left.append(a)
            right.append(b)
    return [tuple(left), tuple(right)]


def _hash_alike(a: str, b: str) -> bool:
    """True when equal values of types ``a`` and ``b`` hash to the same partition.

    Numbers are hashed as DOUBLE (equal numbers are equal doubles); other types
    only when both sides have the same type.
    """
    wa, wb = wire_type(a), wire_type(b)
    return (wa.numeric and wb.numeric) or a.upper() == b.upper()
