"""Cut a circuit into stages for a partitioned executor (Spark mode).

A *stage* is one non-linear operator (a join, an aggregate, a DISTINCT, a
per-key operator…), or the store of a base table or of a view's output,
together with the key each input is partitioned by. Changes between stages are
repartitioned by that key, so every partition of a stage sees all rows of its
keys and keeps state for them alone; linear operators (filter, project, UNION
ALL) between stages need no state and run on the changes as they flow.

Everything here goes through the operator interface (``ivm.operators.base``):
each operator's ``input_keys()`` is what its stage hashes on (``()``: one
partition: a global aggregate, a cross join), ``reads_integrals()`` which inputs'
traces the stage keeps beside it, ``traces()`` what it keeps itself, and a
linear operator's ``column_origin`` how a key passes through it. The only
Spark-specific choice: co-partitioned key columns (a join's sides) are kept
only where equal values of the two sides' types hash alike.

A stage is named after its operator's kind and fingerprint (``join-<hex>``),
as traces are: never by position.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ivm.circuit.circuit import Circuit
from ivm.execution.spark.wire import wire_type, wire_types
from ivm.operators.aggregate import Aggregate, LocalAggregate
from ivm.operators.base import Operator
from ivm.operators.scan import Scan, Source
from ivm.operators.top_k import TopK
from ivm.schema import Schema, TableSchema

STAGE_FINGERPRINT_CHARS = 12
"""Hex digits of an operator's fingerprint in its stage's directory name."""


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
    replicated: bool = False  # every partition reads all of it (its key is then ())

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
    kind: str  # "table", "output", or the kind of the stage's operator ("join", "aggregate"…)
    inputs: tuple[StageInput, ...]
    output: Schema
    circuit: Circuit | None = None  # operator stages: Sources in0.., the operator, then the
    # linear operators up to the view's output when the stage also stores the view
    produces: str | None = None  # fingerprint of the view-circuit operator whose change it emits
    table: TableSchema | None = None  # for a table stage
    contents_key: tuple[str, ...] | None = None  # set when the stage stores its relation's
    # contents (a table, or the view: output columns equal on a key land in one partition)
    alone: str = ""  # why the stage runs on one partition (explain), when it does

    @property
    def partitioned(self) -> bool:
        """False when the stage runs on a single partition (no key)."""
        return bool(self.inputs[0].key)

    @property
    def contents(self) -> bool:
        """True when the stage stores the contents of its table or view (trace ``contents``)."""
        return self.contents_key is not None

    @property
    def placement(self) -> str:
        """The stage's name, and how it is partitioned where that may differ for one
        operator (a fixed point over an invariant column, once run on one partition): what
        a view's manifest records, so state laid out for the other placement is another
        plan's (rebuilt), never read as this one's."""
        if not any(s.replicated for s in self.inputs):
            return self.name
        return f"{self.name} by [{', '.join(self.inputs[0].key)}]"

    def kept_inputs(self) -> list[tuple[str, Schema, tuple[str, ...]]]:
        """(name, schema, key) of each input whose integral the stage keeps."""
        return [(input_name(i), s.schema, s.key) for i, s in enumerate(self.inputs) if s.kept]

    def describe(self) -> str:
        """One line for ``explain``."""
        keys = "; ".join(
            f"in{i} to every partition" if s.replicated
            else f"in{i} by [{', '.join(s.key)}]" if s.key else f"in{i} on one partition"
            for i, s in enumerate(self.inputs)
        )
        kept = ", ".join(f"in{i}" for i, s in enumerate(self.inputs) if s.kept) or "none"
        stores = "; stores the view" if self.contents and self.kind != "table" else ""
        alone = f" ({self.alone})" if self.alone and not self.partitioned else ""
        return f"{self.name}: {keys}{alone}; integrals kept: {kept}{stores}"


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


def is_anchor(op: Operator) -> bool:
    """True for operators that start a stage: every non-linear operator with inputs."""
    return not op.linear and bool(op.inputs)


def view_stages(circuit: Circuit) -> list[Stage]:
    """The stages of a view's circuit (made of binary joins), in dependency order.

    The last stage stores the view's contents. That is the last operator's stage
    when the view's output keeps that operator's key columns as they are (so equal
    output rows share a partition and each partition consolidates its own rows);
    otherwise a stage of its own, partitioned by the whole output row.
    """
    anchors = [op for op in circuit.operators if is_anchor(op)]
    stages = [operator_stage(op) for op in anchors]
    fused = _fused_output(circuit, anchors[-1]) if anchors else None
    if fused is not None:
        stages[-1] = fused
    else:
        output = circuit.output
        schema = output.schema
        stages.append(
            Stage(
                name=f"output-{output.fingerprint[:STAGE_FINGERPRINT_CHARS]}",
                kind="output",
                inputs=(StageInput(schema, tuple(schema.names), kept=False, stream=output),),
                output=schema,
                produces=output.fingerprint,
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
    while leaf is not None and leaf.linear and len(leaf.inputs) == 1:
        chain.append(leaf)
        leaf = leaf.inputs[0]
    if leaf is None or not chain:
        return stage_input
    key = list(stage_input.key)
    for op in chain:  # from the input down to the leaf
        below = [op.column_origin(name) for name in key]
        if any(name is None for name in below):
            return stage_input
        key = [name for name in below if name is not None]
    table = f"__ivm_leaf{index}"
    return replace(
        stage_input,
        carried=Carried(
            leaf=leaf,
            schema=leaf.schema,
            key=tuple(key),
            sql=linear_sql(chain, f"SELECT * FROM {table}"),
        ),
    )


def linear_sql(chain: list[Operator], leaf: str) -> str:
    """SQL of the change of ``chain[0]``: the one-input linear operators of ``chain``
    (from the top down) applied to ``leaf``, the change of the last one's input."""
    sql = leaf
    for op in reversed(chain):
        result = op.linear_sql([sql])
        assert result is not None
        sql = result
    return sql


def _fused_output(circuit: Circuit, anchor: Operator) -> Stage | None:
    """``anchor``'s stage extended to store the view, when only one-input linear
    operators that keep the anchor's key columns lie between it and the output."""
    consumers = circuit.consumers()
    chain: list[Operator] = []
    op = anchor
    while op is not circuit.output:
        after = consumers.get(op.fingerprint, [])
        if len(after) != 1 or not (after[0].linear and len(after[0].inputs) == 1):
            return None
        op = after[0]
        chain.append(op)
    stage = operator_stage(anchor)
    key = _key_through(anchor, chain)
    if key is None:
        return None
    assert stage.circuit is not None
    top = stage.circuit.output
    for op in chain:
        top = op.with_inputs([top])
    return replace(
        stage,
        circuit=Circuit.of(stage.circuit.view, top),
        output=circuit.output.schema,
        produces=circuit.output.fingerprint,
        contents_key=key,
    )


def _key_through(anchor: Operator, chain: list[Operator]) -> tuple[str, ...] | None:
    """The output columns carrying the anchor's partition key after ``chain``; None if the
    anchor's output has no such key, or a projection drops one."""
    key = anchor.output_key()
    if key is None:
        return None
    names = list(key)
    for op in chain:
        renamed = []
        for name in names:
            target = next((out for out in op.schema.names if op.column_origin(out) == name), None)
            if target is None:
                return None
            renamed.append(target)
        names = renamed
    return tuple(names)


def operator_stage(op: Operator) -> Stage:
    """The stage of one anchor operator: its inputs become Sources ``in0``, ``in1``…"""
    schemas = [i.schema for i in op.inputs]
    replicated = op.replicated_inputs()
    hashed = [i for i, r in enumerate(replicated) if not r]
    keys: list[tuple[str, ...]] = [() for _ in schemas]
    aligned = _co_partitioned([op.input_keys()[i] or () for i in hashed],
                              [schemas[i] for i in hashed])
    for i, key in zip(hashed, aligned, strict=True):
        keys[i] = key
    kept = op.reads_integrals()
    sources = tuple(
        Source(Scan(schema=schema, name=input_name(i)), ())
        for i, schema in enumerate(schemas)
    )
    local = op.with_inputs(sources)
    inputs = tuple(
        StageInput(schema, key, kept=k, stream=stream, replicated=r)
        for schema, key, k, stream, r in zip(schemas, keys, kept, op.inputs, replicated,
                                             strict=True)
    )
    return Stage(
        name=f"{op.kind}-{op.fingerprint[:STAGE_FINGERPRINT_CHARS]}",
        kind=op.kind,
        inputs=inputs,
        output=op.schema,
        circuit=Circuit.of(f"stage-{op.kind}", local),
        produces=op.fingerprint,
        alone="" if any(keys) else why_one_partition(op),
    )


def why_one_partition(op: Operator) -> str:
    """Why ``op``'s stage cannot be partitioned, in explain's words."""
    below = op.inputs[0].node if op.inputs else None
    if isinstance(op.node, Aggregate):
        if isinstance(below, LocalAggregate):
            return "merges the partitions' partial aggregates: at most a row each"
        if op.kind == "aggregate":
            return "a global aggregate of running sums: one row of state"
        return "a global aggregate whose calls do not merge from partials: all its rows"
    if isinstance(op.node, TopK):
        if isinstance(below, TopK) and below.local:
            return "merges the partitions' top rows"
        return "a global top-k"
    if op.kind == "fixed_point":
        return "a recursive view's iterations run in one task"
    if op.kind == "window":
        return "a window without PARTITION BY"
    if len(op.inputs) > 1:
        return "no equality between the inputs whose sides hash alike"
    return f"{op.kind} has no key"


def _co_partitioned(
    keys: list[tuple[str, ...]], schemas: list[Schema]
) -> list[tuple[str, ...]]:
    """Keys of several inputs, aligned by position, kept only at positions whose
    columns hash alike in every input (a single input keeps its key)."""
    if len(keys) < 2:
        return keys
    width = min(len(k) for k in keys)
    positions = [
        p
        for p in range(width)
        if all(
            _hash_alike(schemas[0].type_of(keys[0][p]), schemas[i].type_of(keys[i][p]))
            for i in range(1, len(keys))
        )
    ]
    return [tuple(k[p] for p in positions) for k in keys]


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
