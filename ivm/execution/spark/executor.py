"""The Spark executor: runs stages (``ivm.execution.spark.stages``) as Spark jobs, epoch by
epoch.

Per stage and epoch: the stage's input changes (Spark DataFrames) are brought
into one *wide* DataFrame whose column ``__p`` is each row's bucket,
``pmod(hash(key), P)``; it is shuffled so that bucket ``b`` lands in shuffle
partition ``b`` (``repartition`` by a per-bucket salt) and ``mapInArrow`` hands
each bucket's rows to ``ivm.execution.spark.stage_task.apply_partition``, which applies them to
partition file ``b``. Stages are chained lazily, as one DataFrame plan: an epoch runs
every stage of every table and view as one Spark job (``ivm.execution.spark.epoch_job``).
A change read more than once passes through an exchange of its own, which Spark
reuses for every reader (``ReuseExchange``), so its stage runs once.

Linear operators between stages (filter, project, UNION ALL) run in
``mapInArrow`` too, as DuckDB SQL over each Arrow batch: no state, no shuffle.
A leaf that reads no relation (a VALUES list) is constant: it has a change only
at a backfill, made by one task from the plan (``stage_task.constant_change``)
and hashed to the reading stage's partitions like any change, so each of its
rows lands in exactly one partition (not one copy per partition), where the
stage keeps it as that input's integral if it reads one.

Keys are hashed by Spark's ``hash`` (Murmur3) after numbers are turned into
DOUBLE (plus 0.0, so -0.0 and 0.0 agree), so equal values of the two sides of a
join land in the same partition whatever their numeric types.
"""

from __future__ import annotations

import functools
import itertools
import re
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import mmh3
from py4j.protocol import Py4JJavaError
from pyspark.accumulators import Accumulator
from pyspark.errors import AnalysisException, ParseException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import errors
from ivm.execution.failures import NOT_IVMS_FAULT, duckdb_text, internal_message
from ivm.execution.spark.refusals import Refusal, TaskRefused, first_refusal
from ivm.execution.spark.spark_types import spark_struct
from ivm.execution.spark.stage_task import Ticket
from ivm.execution.spark.stages import Stage, linear_sql
from ivm.execution.spark.tasks import (
    BUCKET,
    FailurePoint,
    StageCounts,
    StageKey,
    TaskLabel,
    applied,
    constant_task,
    labeled,
    linear_task,
)
from ivm.execution.spark.wire import WireType, wire_types
from ivm.operators.base import Operator
from ivm.schema import WEIGHT, Schema

SPARK_HASH_SEED = 42
"""The seed of Spark's ``hash`` and of its hash partitioning."""

T = TypeVar("T")


class SparkEpoch:
    """One epoch (or one view's backfill) on Spark: runs stages, keeps each relation's change."""

    def __init__(
        self,
        spark: SparkSession,
        partitions: int,
        ticket: Ticket,
        failure: FailurePoint | None = None,
        times: Accumulator[dict[StageKey, StageCounts]] | None = None,
        refusals: Accumulator[list[Refusal]] | None = None,
    ) -> None:
        self.spark = spark
        self.partitions = partitions
        self.ticket = ticket
        self.failure = failure
        self.times = times  # each stage task adds its seconds and rows here, by stage
        # Tasks refusing the data record it here (``refusals``), the stage's place in the
        # plan beside it; None: they fail, as any task failure.
        self.refusals = refusals
        if refusals is not None:
            refusals.value = []
        self._order = itertools.count()
        self.changes: dict[str, DataFrame] = {}  # table or view name -> its change (wire)

    def label(self, relation: str, view: bool, stage: str = "") -> TaskLabel:
        """The label of a task working for ``relation`` (a view's, if ``view``), its place
        in the plan after every stage labelled before it."""
        return TaskLabel(relation, view, self.times if stage else None, stage, self.refusals,
                         next(self._order))

    def act(self, action: Callable[[], T]) -> T:
        """Run ``action`` (a Spark action over this epoch's plan); if a task refused the
        data, raise ``TaskRefused`` (also when the action failed: the refusal came first)."""
        try:
            result = action()
        except BaseException as error:
            refused = self.refused()
            if refused is not None:
                raise refused from error
            raise
        refused = self.refused()
        if refused is not None:
            raise refused
        return result

    def refused(self) -> TaskRefused | None:
        """The refusal of this epoch's tasks so far (the earliest stage's), if any."""
        return first_refusal(self.refusals.value) if self.refusals is not None else None

    def run_stage(
        self,
        stage: Stage,
        directory: Path,
        inputs: list[DataFrame | None],
        shared: bool = False,
        owner: tuple[str, bool] | None = None,
    ) -> DataFrame | None:
        """The output change of ``stage`` applied to every partition, as a lazy DataFrame.

        Nothing runs until an action reads it. A ``shared`` change (read more than once)
        ends in an exchange of its own, which Spark reuses for each of its readers in
        the same job: the stage runs once (running it again would be correct, each
        task re-emitting what it stored, but costs its tasks again). ``owner``: the table
        or view the stage belongs to, and whether it is a view (named in its errors).
        """
        wide = self._wide(stage, inputs)
        if wide is None:
            return None
        if stage.partitioned:
            salts = ", ".join(f"CAST({s} AS BIGINT)" for s in bucket_salts(self.partitions))
            wide = wide.repartition(
                self.partitions, F.expr(f"element_at(array({salts}), {BUCKET} + 1)")
            )
        else:
            wide = wide.repartition(1)
        label = self.label(*owner, stage.name) if owner is not None else None
        apply = functools.partial(applied, stage, str(directory), self.ticket, self.failure)
        task = functools.partial(labeled, label, apply)
        output = wide.mapInArrow(task, spark_struct(stage.output))
        return share(output, self.partitions) if shared else output

    def run_view(self, directory: Path, stages: list[Stage], view: str) -> DataFrame | None:
        """The change of ``view`` (None if it has none), all its stages chained lazily."""
        uses, _ = reads(stages)
        outputs: dict[str, DataFrame | None] = {}
        glued: dict[str, DataFrame | None] = {}
        result = None
        for stage in stages:
            inputs = [
                self._glue(s.carried.leaf if s.carried else s.stream, outputs, glued, view)
                for s in stage.inputs
                if s.stream
            ]
            shared = stage.produces is not None and uses[stage.produces] > 1
            result = self.run_stage(
                stage, directory / stage.name, inputs, shared, owner=(view, True)
            )
            if stage.produces is not None:
                outputs[stage.produces] = result
        return result

    # -- between stages ----------------------------------------------------------------------

    def _glue(
        self,
        op: Operator,
        outputs: dict[str, DataFrame | None],
        glued: dict[str, DataFrame | None],
        view: str,
    ) -> DataFrame | None:
        """The change of ``op`` as a DataFrame, from stage outputs and sources."""
        if op.fingerprint in outputs:
            return outputs[op.fingerprint]
        if op.fingerprint in glued:
            return glued[op.fingerprint]
        source = op.node.source_name
        if not op.inputs and source is not None:
            result = self.changes.get(source)
        elif not op.inputs:  # reads no relation: a constant, which changes at a backfill only
            result = self._constant(op) if self.ticket.backfill else None
        elif op.linear and len(op.inputs) == 1:
            result = self._linear_chain(op, outputs, glued, view)
        elif op.linear:  # the signed sum of its inputs
            parts = [self._glue(i, outputs, glued, view) for i in op.inputs]
            present = [
                _conformed(p, op.schema, sign)
                for p, sign in zip(parts, op.input_signs(), strict=True)
                if p is not None
            ]
            result = functools.reduce(DataFrame.unionAll, present) if present else None
        else:  # pragma: no cover - every non-linear operator is a stage
            raise TypeError(f"{op.kind} is neither a stage nor linear")
        glued[op.fingerprint] = result
        return result

    def _constant(self, op: Operator) -> DataFrame:
        """The rows of a constant leaf as a change, made by one task from the plan; the stage
        reading them hashes them to its partitions like any change (so each row lands in
        exactly one partition, the one its key belongs to) and keeps them if it must."""
        task = functools.partial(constant_task, op, self.ticket)
        return self.spark.range(0, 1, numPartitions=1).mapInArrow(task, spark_struct(op.schema))

    def _linear_chain(
        self,
        op: Operator,
        outputs: dict[str, DataFrame | None],
        glued: dict[str, DataFrame | None],
        view: str,
    ) -> DataFrame | None:
        """One-input linear operators down to the next other input, as one SQL query (its
        tasks named after ``view`` in their errors)."""
        chain = []
        leaf = op
        while leaf.linear and len(leaf.inputs) == 1 and leaf.fingerprint not in outputs:
            chain.append(leaf)
            leaf = leaf.inputs[0]
        source = self._glue(leaf, outputs, glued, view)
        if source is None:
            return None
        sql = linear_sql(chain, "SELECT * FROM __ivm_leaf")
        linear = functools.partial(linear_task, sql, leaf.schema, op.schema, self.ticket)
        task = functools.partial(labeled, self.label(view, True), linear)
        return source.mapInArrow(task, spark_struct(op.schema))

    def _wide(self, stage: Stage, inputs: list[DataFrame | None]) -> DataFrame | None:
        """One DataFrame of every input's change: ``__i``, the bucket ``__p`` (the hashed
        key modulo the partition count), all inputs' columns, the weight.

        In a backfill every bucket gets one row (``__i`` = -1, weight 0), so that every
        partition file is created even where no row lands. (Columns are given as SQL
        text: one call into the JVM per input, not one per column.)
        """
        wires = [wire_types(s.wire_schema, f"stage {stage.name}") for s in stage.inputs]
        parts = []
        for i, frame in enumerate(inputs):
            if frame is None:
                continue
            own = stage.inputs[i]
            keys = []
            for name in own.wire_key:
                j = own.wire_schema.names.index(name)
                keys.append(f"CAST(c{j} AS DOUBLE) + 0.0" if wires[i][j].numeric else f"c{j}")
            if own.replicated:  # every partition reads all of it: a copy of each row for each
                bucket = f"explode(sequence(0, {self.partitions - 1}))"
            else:
                hashed = f"pmod(hash({', '.join(keys)}), {self.partitions})" if keys else "0"
                bucket = f"CAST({hashed} AS INT)"
            columns = [f"CAST({i} AS INT) AS __i", f"{bucket} AS {BUCKET}"]
            columns += padded_columns(wires, i, "i")
            columns.append(WEIGHT)
            parts.append(frame.selectExpr(*columns))
        if self.ticket.backfill:
            buckets = self.partitions if stage.partitioned else 1
            columns = ["CAST(-1 AS INT) AS __i", f"CAST(id AS INT) AS {BUCKET}"]
            columns += padded_columns(wires, None, "i")
            columns.append(f"CAST(0 AS BIGINT) AS {WEIGHT}")
            parts.append(self.spark.range(buckets).selectExpr(*columns))
        if not parts:
            return None
        return functools.reduce(DataFrame.unionAll, parts)


@functools.cache
def bucket_salts(partitions: int) -> list[int]:
    """For each bucket b, the smallest BIGINT that Spark's hash partitioning into
    ``partitions`` sends to partition b, computed here rather than by a Spark job: Spark
    hashes a BIGINT with 32-bit x86 Murmur3, seed 42, over its eight little-endian bytes,
    and takes the hash modulo the partition count. (Were they wrong, buckets would still
    each reach one task, only less evenly spread: a task applies whatever buckets it gets.)
    """
    salts: dict[int, int] = {}
    candidate = 0
    while len(salts) < partitions:
        spark_hash = mmh3.hash(struct.pack("<q", candidate), SPARK_HASH_SEED, signed=True)
        salts.setdefault(spark_hash % partitions, candidate)
        candidate += 1
    return [salts[b] for b in range(partitions)]


def padded_columns(wires: list[list[WireType]], own: int | None, prefix: str) -> list[str]:
    """Columns of a wide union of several relations (``<prefix><k>_c<j>``: relation k's
    column j, on the wire): relation ``own``'s columns (``c<j>``) in its place, NULL in
    every other relation's (all NULL when ``own`` is None)."""
    return [
        f"{f'c{j}' if k == own else f'CAST(NULL AS {wire.spark})'} AS {prefix}{k}_c{j}"
        for k, types in enumerate(wires)
        for j, wire in enumerate(types)
    ]


def share(change: DataFrame, partitions: int) -> DataFrame:
    """``change`` behind an exchange of its own: every reader of the returned DataFrame in
    one job reads that exchange's output (Spark reuses an exchange whose plan is the
    same), so what is below it runs once."""
    return change.repartition(partitions)


def reads(stages: list[Stage]) -> tuple[Counter[str], Counter[str]]:
    """How many times the stages' inputs read each stage's output (by the fingerprint of
    the operator it produces) and each source (table or view), through linear operators.

    An input is read as ``run_view`` reads it: from its carried leaf when it has one, and
    only earlier stages' outputs count (a view's output stage produces the very operator
    its input streams).
    """
    produced: set[str] = set()
    outputs: Counter[str] = Counter()
    sources: Counter[str] = Counter()

    def visit(op: Operator) -> None:
        if op.fingerprint in produced:
            outputs[op.fingerprint] += 1
        elif not op.inputs and op.node.source_name is not None:
            sources[op.node.source_name] += 1
        else:
            for child in op.inputs:
                visit(child)

    for stage in stages:
        for stage_input in stage.inputs:
            if stage_input.stream is not None:
                visit(stage_input.carried.leaf if stage_input.carried else stage_input.stream)
        if stage.produces is not None:
            produced.add(stage.produces)
    return outputs, sources


def _conformed(frame: DataFrame, schema: Schema, sign: int = 1) -> DataFrame:
    """``frame`` cast to ``schema``'s wire types (a UNION ALL's inputs may differ in type),
    its weights multiplied by ``sign``."""
    wires = wire_types(schema, "a relation")
    weight = WEIGHT if sign == 1 else f"CAST({WEIGHT} * {sign} AS BIGINT) AS {WEIGHT}"
    return frame.selectExpr(
        *[f"CAST(c{j} AS {w.spark}) AS c{j}" for j, w in enumerate(wires)], weight
    )


_IVM_ERROR = re.compile(r"ivm\.errors\.(\w+): (.*)")
_EXCEPTION = re.compile(r"^([\w.]+(?:Error|Exception|Failure))(?:: (.*))?$", re.MULTILINE)
_JVM = ("java.", "org.", "py4j.", "pyspark.", "scala.")


def translate_error(error: BaseException) -> errors.IvmError | None:
    """The ``IvmError`` a failed Spark job stands for, or None if it is not a Spark error.

    A refusal the tasks recorded (``TaskRefused``) is its error.
    An ``IvmError`` a task raised comes back as itself. A Python exception a task raised
    is ivm's fault (``InternalError``) unless it is DuckDB objecting to a value or to
    the machine (``ivm.execution.failures``); so is Spark failing to analyze or parse
    the SQL ivm gave it. Spark's own failures (a lost executor…) are ``ExecutionError``.
    """
    if isinstance(error, TaskRefused):
        return error.error
    if not isinstance(error, (PySparkException, Py4JJavaError)):
        return None
    text = str(error)
    match = _IVM_ERROR.search(text)
    if match:
        kind = getattr(errors, match[1], None)
        if isinstance(kind, type) and issubclass(kind, errors.IvmError):
            return kind(match[2].strip())
    raised = [m for m in _EXCEPTION.finditer(text) if not m[1].startswith(_JVM)]
    if raised:  # a Python exception in a task: the last one a traceback shows was raised
        name, message = raised[-1][1], (raised[-1][2] or "")[:2000]
        kind = name.rsplit(".", 1)[-1]
        if kind in NOT_IVMS_FAULT:
            return errors.ExecutionError(f"a Spark task failed: {kind}: {message}")
        what = "ivm's own SQL" if "duckdb" in name else "a Spark task of ivm"
        return errors.InternalError(internal_message(duckdb_text(f"{kind}: {message}"), what=what))
    first = next((line for line in text.splitlines() if line.strip()), text).strip()
    if isinstance(error, (AnalysisException, ParseException)):
        return errors.InternalError(
            internal_message(first[:2000], what="the Spark SQL ivm generated")
        )
    return errors.ExecutionError(f"a Spark job failed: {first[:2000]}")
