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
from typing import Literal

from sqlglot import exp

from ivm.circuit.circuit import (
    Circuit,
    DeltaJoin,
    IncrementalAggregate,
    IncrementalDistinct,
    Operator,
    Source,
)
from ivm.errors import UnsupportedSQL
from ivm.execution.spark.wire import wire_type, wire_types
from ivm.plan.nodes import Filter, Project, Scan
from ivm.plan.sql import filter_sql, project_sql
from ivm.schema import Schema, TableSchema

StageKind = Literal["table", "join", "aggregate", "distinct", "output"]


@dataclass(frozen=True)
class Carried:
    """An input whose filters and projections run inside the stage's task.

    What travels is the change of ``leaf`` (a source, or an earlier stage's output);
    the task turns it into the input with ``sql`` (over table ``__ivm_leaf<i>``).
    Possible when the input's key columns are leaf columns passed through as they are.
    """

    leaf: Operator
    schema: Schema  # the leaf's columns
    key: tuple[str, ...]  # the input's key, as leaf columns
    sql: str


@dataclass(frozen=True)
class StageInput:
    """One input of a stage: whose change it is, and how it is partitioned."""

    schema: Schema
    key: tuple[str, ...]  # columns hashed to pick the partition; () means one partition
    kept: bool  # the stage keeps this input's integral (its trace ``in<i>``)
    stream: Operator | None = None  # the view-circuit operator producing it (None: a table)
    carried: Carried | None = None

    @property
    def wire_schema(self) -> Schema:
        """Columns of the rows that travel to the stage for this input."""
        return self.carried.schema if self.carried else self.schema

    @property
    def wire_key(self) -> tuple[str, ...]:
        """The key as columns of the rows that travel."""
        return self.carried.key if self.carried else self.key


@dataclass(frozen=True)
class Stage:
    """One stage: its inputs, what it computes, and the change it emits."""

    name: str  # directory name, unique within its view
    kind: StageKind
    inputs: tuple[StageInput, ...]
    output: Schema
    circuit: Circuit | None = None  # join/aggregate/distinct: Sources in0.., the operator, then
    # the linear operators up to the view's output when the stage also stores the view
    produces: int | None = None  # index of the view-circuit operator whose change it emits
    table: TableSchema | None = None  # for a table stage
    contents_key: tuple[str, ...] | None = None  # set when the stage stores its relation's
    # contents (a table, or the view: output columns equal on a key land in one partition)

    @property
    def partitioned(self) -> bool:
        """False when the stage runs on a single partition (no key)."""
        return bool(self.inputs[0].key)

    @property
    def contents(self) -> bool:
        """True when the stage stores the contents of its table or view (trace ``contents``)."""
        return self.contents_key is not None

    def keys(self) -> dict[str, tuple[str, ...]]:
        """Sort key of each trace, by its name inside a partition (for compaction)."""
        keys = {input_name(i): s.key for i, s in enumerate(self.inputs) if s.kept}
        if self.circuit is not None:
            for op in self.circuit.operators:
                if op.state_key is not None:
                    keys[f"op{op.index}"] = op.state_key
        if self.contents_key is not None:
            keys[CONTENTS] = self.contents_key
        return keys

    def describe(self) -> str:
        """One line for ``explain``."""
        keys = "; ".join(
            f"in{i} by [{', '.join(s.key)}]" if s.key else f"in{i} on one partition"
            for i, s in enumerate(self.inputs)
        )
        kept = ", ".join(f"in{i}" for i, s in enumerate(self.inputs) if s.kept) or "none"
        stores = "; stores the view" if self.contents and self.kind != "table" else ""
        return f"{self.name}: {keys}; integrals kept: {kept}{stores}"


CONTENTS = "contents"
"""Name of the trace holding a table's or view's contents in its storing stage."""


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
        inputs=(StageInput(table.schema, key, kept=False),),
        output=table.schema,
        table=table,
        contents_key=key,
    )


def view_stages(circuit: Circuit) -> list[Stage]:
    """The stages of a view's circuit (made of binary joins), in dependency order.

    The last stage stores the view's contents. That is the last operator's stage
    when the view's output keeps that operator's key columns as they are (so equal
    output rows share a partition and each partition consolidates its own rows);
    otherwise a stage of its own, partitioned by the whole output row.
    """
    anchors = [op for op in circuit.operators if op.stateful or _is_join(op)]
    stages = [_operator_stage(op) for op in anchors]
    fused = _fused_output(circuit, anchors[-1]) if anchors else None
    if fused is not None:
        stages[-1] = fused
    else:
        output = circuit.output
        schema = output.node.schema
        stages.append(
            Stage(
                name="output",
                kind="output",
                inputs=(StageInput(schema, tuple(schema.names), kept=False, stream=output),),
                output=schema,
                produces=output.index,
                contents_key=tuple(schema.names),
            )
        )
    stages = [
        replace(stage, inputs=tuple(_carry(s, i) for i, s in enumerate(stage.inputs)))
        for stage in stages
    ]
    for stage in stages:
        for i, stage_input in enumerate(stage.inputs):
            what = f"view {circuit.view!r}, stage {stage.name} in{i}"
            wire_types(stage_input.schema, what)
            wire_types(stage_input.wire_schema, what)
        wire_types(stage.output, f"view {circuit.view!r}, stage {stage.name}")
    return stages


def _carry(stage_input: StageInput, index: int) -> StageInput:
    """``stage_input`` with its filters and projections moved into the stage, if possible."""
    chain: list[Operator] = []
    leaf = stage_input.stream
    while leaf is not None and isinstance(leaf.node, (Filter, Project)):
        chain.append(leaf)
        leaf = leaf.inputs[0]
    if leaf is None or not chain:
        return stage_input
    key = list(stage_input.key)
    for op in chain:  # from the input down to the leaf
        node = op.node
        if isinstance(node, Project):
            source = op.inputs[0].node.schema
            exprs = dict(node.exprs)
            below = []
            for name in key:
                found = _passed_through(exprs[name], source, node.schema.type_of(name))
                if found is None:
                    return stage_input
                below.append(found)
            key = below
    table = f"__ivm_leaf{index}"
    return replace(
        stage_input,
        carried=Carried(
            leaf=leaf,
            schema=leaf.node.schema,
            key=tuple(key),
            sql=linear_sql(chain, f"SELECT * FROM {table}"),
        ),
    )


def _passed_through(expression: exp.Expression, source: Schema, type_: str) -> str | None:
    """The input column ``expression`` is, unchanged (or cast to its own type); else None."""
    if isinstance(expression, exp.Cast):
        expression = expression.this
        if isinstance(expression, exp.Column) and source.type_of(expression.name) != type_:
            return None
    return expression.name if isinstance(expression, exp.Column) else None


def linear_sql(chain: list[Operator], leaf: str) -> str:
    """SQL of the change of ``chain[0]``: the filters and projections of ``chain`` (from the
    top down) applied to ``leaf``, the change of the last one's input."""
    sql = leaf
    for op in reversed(chain):
        node = op.node
        if isinstance(node, Filter):
            sql = filter_sql(sql, node.predicate)
        else:
            assert isinstance(node, Project)
            sql = project_sql(sql, node.exprs, weighted=True)
    return sql


def _fused_output(circuit: Circuit, anchor: Operator) -> Stage | None:
    """``anchor``'s stage extended to store the view, when only filters and projections
    that keep the anchor's key columns lie between it and the output; else None."""
    consumers: dict[int, list[Operator]] = {}
    for op in circuit.operators:
        for child in op.inputs:
            consumers.setdefault(child.index, []).append(op)
    chain: list[Operator] = []
    op = anchor
    while op is not circuit.output:
        after = consumers.get(op.index, [])
        if len(after) != 1 or not isinstance(after[0].node, (Filter, Project)):
            return None
        op = after[0]
        chain.append(op)
    key = _key_through(_stage_key(anchor), chain)
    if key is None:
        return None
    stage = _operator_stage(anchor)
    assert stage.circuit is not None
    operators = list(stage.circuit.operators)
    for op in chain:
        operators.append(replace(op, index=len(operators), inputs=(operators[-1],)))
    return replace(
        stage,
        circuit=Circuit(view=stage.circuit.view, operators=tuple(operators)),
        output=circuit.output.node.schema,
        produces=circuit.output.index,
        contents_key=key,
    )


def _stage_key(anchor: Operator) -> tuple[str, ...]:
    """The anchor's partition key as columns of its output."""
    stage = _operator_stage(anchor)
    return stage.inputs[0].key


def _is_join(op: Operator) -> bool:
    return isinstance(op, DeltaJoin)


def _operator_stage(op: Operator) -> Stage:
    schemas = [i.node.schema for i in op.inputs]
    kind: StageKind
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

    Numbers are hashed as DOUBLE: equal numbers are equal doubles, except that DuckDB
    compares FLOAT with an integer or DECIMAL as FLOAT (16777217 = 16777216::FLOAT),
    so FLOAT pairs only with FLOAT or DOUBLE. Other types only with the same type.
    """
    wa, wb = wire_type(a), wire_type(b)
    if a.upper() == b.upper():
        return True
    if not (wa.numeric and wb.numeric):
        return False
    floats = {"float", "double"}
    if "float" in (wa.spark, wb.spark):
        return wa.spark in floats and wb.spark in floats
    return True


def _key_through(key: tuple[str, ...], chain: list[Operator]) -> tuple[str, ...] | None:
    """The columns carrying ``key``'s values after ``chain``; None if a projection drops one."""
    names = list(key)
    for op in chain:
        node = op.node
        if not isinstance(node, Project):
            continue
        source = op.inputs[0].node.schema
        renamed = []
        for name in names:
            target = next(
                (out for out, e in node.exprs if _same_value(e, name, source, node.schema, out)),
                None,
            )
            if target is None:
                return None
            renamed.append(target)
        names = renamed
    return tuple(names)


def _same_value(
    expression: exp.Expression, name: str, source: Schema, result: Schema, out: str
) -> bool:
    """True when ``expression`` is column ``name`` itself (or cast to the type it has)."""
    if isinstance(expression, exp.Cast) and source.type_of(name) == result.type_of(out):
        expression = expression.this
    return isinstance(expression, exp.Column) and expression.name == name
