"""GROUP BY whose every call is invertible: kept as group versions.

Meaning: as ``ivm.operators.aggregate``: one row per group with positive weight
(a global aggregate always has its one row).

State: a trace of *group versions*, partitioned by the group keys. Each row
holds the keys, the group's row count ``__cnt``, each call's moments
``__m<j>_<name>`` (running sums declared by the function registry) and the
visible output values. An epoch appends, for every touched group, the old
version with weight −1 and the new version with weight +1; consolidation
(compaction) leaves one live version per group. The view-facing change is
exactly those ±1 rows projected to keys and visible values.

Per epoch: new moments = old moments + the change's partial sums (deletes
subtract), for the touched groups only; the values follow from the moments
(``finalize``). Nothing reads the group's rows. Where the executor keeps the versions
arranged (an embedded epoch) and every function has an in-memory form, the step runs
in memory (``ivm.operators.invertible_step``): the partial sums are the one statement;
elsewhere the whole step is one statement (``step_sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from ivm.functions.aggregates import Invertible
from ivm.operators.aggregate import Aggregate, AggregateCall
from ivm.operators.base import At, Describe, Operator, Run, TraceSpec
from ivm.operators.invertible_step import Call, stepped_versions
from ivm.operators.join import fused_join
from ivm.plan.sql import W, column_list, empty_relation, null_safe_match
from ivm.schema import Column, Schema, quote
from ivm.storage.sqltext import key_hash_sql

COUNT = "__cnt"
VERSIONS = "versions"
KEY_HASH = "__ivm_kh"


class InMemory(Enum):
    """What the in-memory step says instead of the versions' SQL."""

    NO_GROUP = "no row of the change reaches a group: no change"
    UNDECIDED = "the lookup or the step cannot decide: the statement steps"


def moment_column(index: int, name: str) -> str:
    """State column of moment ``name`` of call ``index``."""
    return f"__m{index}_{name}"


@dataclass(frozen=True, eq=False)
class InvertibleAggregate(Operator):
    """GROUP BY with a trace of group versions updated from the change alone."""

    kind = "aggregate"
    forms: tuple[Invertible, ...] = ()
    state: Schema = Schema(())

    @classmethod
    def build(
        cls,
        node: Aggregate,
        inputs: tuple[Operator, ...],
        forms: Sequence[Invertible],
        describe: Describe,
    ) -> InvertibleAggregate:
        """The operator, with its state columns typed by DuckDB."""
        draft = cls(node, inputs, tuple(forms))
        partials = describe(draft.partials_sql(empty_relation(node.input.schema)))
        columns = [partials.columns[partials.names.index(n)] for n in draft.moment_names()]
        keys = [Column(k, node.input.schema.type_of(k)) for k in node.keys]
        visible = list(node.schema.columns[len(node.keys) :])
        state = Schema((*keys, *columns, *visible))
        return cls(node, inputs, tuple(forms), state)

    @property
    def aggregate(self) -> Aggregate:
        """The aggregate's plan node."""
        assert isinstance(self.node, Aggregate)
        return self.node

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        return (TraceSpec(VERSIONS, self.state, self.aggregate.keys),)

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (self.aggregate.partition_key,)

    def label(self) -> str:
        node = self.aggregate
        calls = ", ".join(c.describe() for c in node.calls)
        return f"InvertibleAggregate {node.grouping()} {calls} (state: group versions by key)"

    # -- computation -------------------------------------------------------------------------

    def change(self, run: Run) -> str | None:
        delta = run.change(self.inputs[0]) if self.aggregate.keys else self.global_input_change(run)
        if delta is None:
            return None
        keys = self.aggregate.keys
        in_memory = self.in_memory and run.arranged
        twice = bool(keys) and fused_join(self.inputs[0])
        if twice and not in_memory:
            # A join's change is read twice (its groups, then the step): run it once.
            delta = run.materialize(self, "input", delta)
        stepped = self._stepped_in_memory(run, delta) if in_memory else InMemory.UNDECIDED
        if stepped is InMemory.NO_GROUP:
            return None
        if stepped is InMemory.UNDECIDED:
            if twice and in_memory:  # the partial sums read it once; the statement, twice
                delta = run.materialize(self, "input", delta)
            touched = f"SELECT DISTINCT {column_list(keys)} FROM ({delta}) AS __d"
            old = run.read(self, VERSIONS, At(keys, touched) if keys else None, live=True)
            versions = run.materialize(self, "versions", self.step_sql(delta, old))
        else:
            versions = stepped
        run.append(self, VERSIONS, versions)
        names = column_list(self.schema.names)
        return f"SELECT {names}, {W} FROM ({versions}) AS v"

    @cached_property
    def in_memory(self) -> bool:
        """Whether the step may run in memory (``ivm.operators.invertible_step``): a GROUP
        BY whose every function has an in-memory form. Not a global aggregate: its one
        version is a read of a few rows in the statement, cheaper than the partial sums'
        fetch, the lookup and an arranged append (TPC-H Q06: 7 against 10 ms)."""
        return bool(self.aggregate.keys) and all(f.compute is not None for f in self.forms)

    def _stepped_in_memory(self, run: Run, delta: str) -> str | InMemory:
        """SQL reading this epoch's group versions, stepped in memory: the change's partial
        sums and key hashes in one statement, the touched groups' versions looked up in
        their arrangement, the rest in numpy. ``InMemory.NO_GROUP`` when the change
        touches no group; ``InMemory.UNDECIDED`` when the lookup or the step cannot
        decide (the statement steps then)."""
        keys = self.aggregate.keys
        partials = run.fetch(self, self.hashed_partials_sql(delta))
        if partials.num_rows == 0:
            return InMemory.NO_GROUP
        hashes = partials.column(KEY_HASH).to_numpy()
        found = run.lookup(self, VERSIONS, partials.select(list(keys)), hashes)
        if found is None:
            return InMemory.UNDECIDED
        old, at = found
        calls = [
            Call(call.name, form, {m.name: moment_column(j, m.name) for m in form.moments},
                 call.func.upper())
            for j, (call, form) in enumerate(zip(self.aggregate.calls, self.forms, strict=True))
        ]
        rows = stepped_versions(
            keys, COUNT, self.moment_names(), calls, self.state.names, partials, old, at
        )
        if rows is None:
            return InMemory.UNDECIDED
        typed = ", ".join(
            f"CAST({quote(c.name)} AS {c.type}) AS {quote(c.name)}" for c in self.state.columns
        )
        return f"SELECT {typed}, {W} FROM ({run.relation(self, 'versions', rows)}) AS m"

    def integral(self, run: Run) -> str:
        return self._visible(run.read(self, VERSIONS, live=True))

    def integral_at(self, run: Run, at: At) -> str | None:
        return self._visible(run.read(self, VERSIONS, at, live=True))  # read, then grouped

    def _visible(self, live: str) -> str:
        """The output's rows of the live group versions ``live``."""
        return f"SELECT {column_list(self.schema.names)}, {W} FROM ({live}) AS __v"

    # -- SQL ---------------------------------------------------------------------------------

    def moment_names(self) -> list[str]:
        """The state's count and moment columns, in order."""
        return [COUNT] + [
            moment_column(j, m.name) for j, form in enumerate(self.forms) for m in form.moments
        ]

    def partials_sql(self, delta: str) -> str:
        """Per group of ``delta``: its weight sum and every moment's partial sum."""
        node = self.aggregate
        parts = [*map(quote, node.keys), f"SUM({W})::BIGINT AS {COUNT}"]
        for j, (call, form) in enumerate(zip(node.calls, self.forms, strict=True)):
            weight = call_weight(call)
            for moment in form.moments:
                term = moment.term.format(x=quote(call.arg or ""))
                total = f"SUM(({term}) * {weight})"
                if moment.type:
                    total = f"CAST({total} AS {moment.type})"
                parts.append(f"{total} AS {moment_column(j, moment.name)}")
        group = f" GROUP BY {column_list(node.keys)}" if node.keys else ""
        return f"SELECT {', '.join(parts)} FROM ({delta}) AS d{group}"

    def hashed_partials_sql(self, delta: str) -> str:
        """``partials_sql`` with the keys typed as the state's and their hash
        (``KEY_HASH``), as the state's arrangement is searched by."""
        keys = self.aggregate.keys
        typed = [f"CAST(p.{quote(k)} AS {self.state.type_of(k)}) AS {quote(k)}" for k in keys]
        moments = column_list(self.moment_names(), "p")
        columns = ", ".join([*typed, moments])
        partials = f"SELECT {columns} FROM ({self.partials_sql(delta)}) AS p"
        return f"SELECT *, {key_hash_sql(keys, '__t')} AS {KEY_HASH} FROM ({partials}) AS __t"

    def step_sql(self, delta: str, live: str) -> str:
        """This epoch's group versions: old ones with −1, new ones with +1. ``live``: the
        live group versions before the epoch, at (at least) the groups ``delta`` touches."""
        node = self.aggregate
        keys = list(node.keys)
        moments = self.moment_names()
        stored = [c for c in self.state.names if c not in {k.name for k in node.calls}]
        old = f"SELECT {column_list(self.state.names)} FROM ({live}) AS s"
        combined = [f"p.{quote(k)}" for k in keys] + [
            f"COALESCE(o.{quote(m)}, 0) + COALESCE(p.{quote(m)}, 0) AS {quote(m)}"
            for m in moments
        ]
        new = (
            f"SELECT {', '.join(combined)} FROM p LEFT JOIN o "
            f"ON {null_safe_match(keys, 'p', 'o')}"
        )
        values = []
        for j, (call, form) in enumerate(zip(node.calls, self.forms, strict=True)):
            refs = {m.name: f"n.{quote(moment_column(j, m.name))}" for m in form.moments}
            type_ = node.schema.type_of(call.name)
            values.append(f"CAST({form.finalize(refs)} AS {type_}) AS {quote(call.name)}")
        # A group exists while it has rows; a global aggregate's single row always exists.
        exists = f" WHERE n.{COUNT} > 0" if keys else ""
        selected = ", ".join([column_list(stored, "n"), *values, f"1::BIGINT AS {W}"])
        new_rows = f"SELECT {selected} FROM n{exists}"  # (no calls: keys and count only)
        old_rows = f"SELECT {column_list(self.state.names)}, -1::BIGINT AS {W} FROM o"
        return (
            f"WITH p AS ({self.partials_sql(delta)}), o AS ({old}), n AS ({new}) "
            f"{old_rows} UNION ALL {new_rows}"
        )


def call_weight(call: AggregateCall) -> str:
    """The weight a row gives ``call``: zero where its FILTER condition is not true."""
    if call.filter is None:
        return W
    return f"CASE WHEN {quote(call.filter)} THEN {W} ELSE 0 END"
