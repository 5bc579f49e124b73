"""GROUP BY kept as running state per group; a group's rows are read only when it is flagged.

Meaning: as ``ivm.operators.aggregate``: one row per group with positive weight
(a global aggregate always has its one row).

Used when every call is invertible or running (``ivm.functions.running``) and at
least one is running: SUM/AVG over DOUBLE or REAL, MIN/MAX, beside any invertible
calls (COUNT, exact SUM…). A view with a per-key call (MEDIAN, COUNT(DISTINCT)…)
is a ``GroupRecompute`` instead.

State, both partitioned and sorted by the group keys:

* ``groups``: group versions, as ``InvertibleAggregate``'s: the keys, the row count
  ``__cnt``, the calls' moments ``__m<j>_<name>`` (exact running sums; calls with
  equal moments share one column; a float sum's are exact fixed-point limbs) and
  running state ``__s<j>_<name>`` (a float sum read from the rows where some value
  is out of the limbs' range, an extreme and its copies), and the visible values. An
  epoch appends, for every touched group, the old version with weight −1 and the
  new one with +1.
* ``input``: the input's integral (rows with weights), read only for flagged groups.

Per epoch, in an embedded session, in memory (``ivm.operators.running_step``: the
partials one statement, the flagged groups' recompute another, the rest in Arrow);
elsewhere, and wherever that step cannot decide, in two statements over the
consolidated change ``d`` (a scratch table):

    p  = per group of d: the count's and moments' partial sums, each form's partials
    o  = the old versions of those groups (read at d's keys)
    c  = p ⋈ o: the new moments and running state (each form's ``combine``), flagged
         where a form's guard says the state cannot give the value (every counted
         copy of an extreme gone, a float value out of the exact range live):
         the first statement, a scratch table
    r  = for the flagged groups only, their running state from their live rows
         (input read at the flagged keys ⊎ d: each form's ``recompute``)
    versions: o with −1; c with +1, r's running state where flagged

The input is read at the flagged keys only, once they are known: through an
arrangement in the embedded session (no scan at all, whatever the table's size), as
a semi-join on the trace elsewhere. The versions' scratch table marks each new
version that was recomputed (``__recomputed``): not state, but what tests count.

Cost: the statement is larger than ``GroupRecompute``'s, so DuckDB takes longer to
parse and plan it (≈10 ms on a 2-core machine). It pays where groups are seldom
recomputed (extremes of large groups; float sums are read only for values out of
their exact range) and the input is large; where
some extreme leaves every epoch (small groups under steady deletes) the input is
read every epoch either way, and a per-key recompute costs less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from ivm.functions.moments import Moment
from ivm.functions.running import Running, exact
from ivm.operators.aggregate import Aggregate, AggregateCall
from ivm.operators.base import At, Describe, Operator, Run, TraceSpec
from ivm.operators.invertible_aggregate import (
    COUNT,
    InMemory,
    call_weight,
    moment_column,
)
from ivm.operators.running_step import (
    GROUPS,
    INPUT,
    RECOMPUTED,
    partial_column,
    state_column,
    stepped_in_memory,
    summed_column,
)
from ivm.plan.sql import (
    W,
    column_list,
    consolidate_sql,
    empty_relation,
    null_safe_match,
)
from ivm.schema import Column, Schema, quote

FLAG = "__flag"


def _moment_sum(call: AggregateCall, moment: Moment) -> str:
    """SQL of a change's partial sum of ``call``'s ``moment``."""
    total = f"SUM(({moment.term.format(x=quote(call.arg or ''))}) * {call_weight(call)})"
    return f"CAST({total} AS {moment.type})" if moment.type else total


def _old(column: str) -> str:
    """Held ``column`` of a group's old version, beside the change's rows."""
    return f"__o{column}"


@dataclass(frozen=True, eq=False)
class RunningAggregate(Operator):
    """GROUP BY with running group state, recomputing only flagged groups from their rows."""

    kind = "aggregate_running"
    forms: tuple[Running, ...] = ()
    state: Schema = Schema(())

    @staticmethod
    def forms_for(node: Aggregate) -> list[Running] | None:
        """Each call's form (an invertible one as exact, else its running one); None
        unless every call has one and some call is running."""
        forms: list[Running] = []
        running = False
        for call in node.calls:
            types = [node.input.schema.type_of(a) for a in call.args]
            invertible = call.function.invertible_for(types, call.distinct)
            if invertible is not None:
                forms.append(exact(invertible))
                continue
            form = call.function.running_for(types, call.distinct)
            if form is None:
                return None
            forms.append(form)
            running = True
        return forms if running else None

    @classmethod
    def build(
        cls,
        node: Aggregate,
        inputs: tuple[Operator, ...],
        forms: Sequence[Running],
        describe: Describe,
    ) -> RunningAggregate:
        """The operator, with its state columns typed (moments by DuckDB)."""
        draft = cls(node, inputs, tuple(forms))
        summed = describe(draft.partials_sql(empty_relation(node.input.schema)))
        keys = [Column(k, node.input.schema.type_of(k)) for k in node.keys]
        moments = [Column(c, summed.type_of(summed_column(c))) for c in draft.moment_sums]
        running = [Column(state_column(j, n), t) for j in draft.keepers for n, t in draft.states(j)]
        visible = list(node.schema.columns[len(node.keys) :])
        return cls(node, inputs, tuple(forms), Schema((*keys, *moments, *running, *visible)))

    @property
    def aggregate(self) -> Aggregate:
        """The aggregate's plan node."""
        assert isinstance(self.node, Aggregate)
        return self.node

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        keys = self.aggregate.keys
        return (TraceSpec(GROUPS, self.state, keys), TraceSpec(INPUT, self.inputs[0].schema, keys))

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (self.aggregate.partition_key,)

    def label(self) -> str:
        node = self.aggregate
        calls = ", ".join(c.describe() for c in node.calls)
        return (
            f"RunningAggregate {node.grouping()} {calls} (state: group versions with running "
            "state, and the input's rows, by key; rows are read only for groups whose "
            "extreme left or whose float sum holds a value out of its exact range)"
        )

    # -- computation -------------------------------------------------------------------------

    def change(self, run: Run) -> str | None:
        delta = run.change(self.inputs[0]) if self.aggregate.keys else self.global_input_change(run)
        if delta is None:
            return None
        names = self.inputs[0].schema.names
        change = run.materialize(self, "delta", consolidate_sql(delta, names))
        keys = self.aggregate.keys
        stepped = stepped_in_memory(self, run, change) if keys and run.arranged else None
        if stepped is InMemory.NO_GROUP:
            return None
        if isinstance(stepped, str):
            return self._appended(run, change, stepped)
        touched = f"SELECT DISTINCT {column_list(keys)} FROM ({change}) AS __d"
        groups = run.read(self, GROUPS, At(keys, touched) if keys else None, live=True)
        old = f"SELECT {column_list(self.state.names)} FROM ({groups}) AS s"
        # Two steps: which groups are flagged first, then only their rows are read.
        combined = run.materialize(
            self, "combined", self.combined_sql(self.partials_sql(change), old)
        )
        if keys:
            flagged = f"SELECT {column_list(keys)} FROM ({combined}) AS c WHERE {FLAG}"
            inputs = run.read(self, INPUT, At(keys, flagged))
        else:
            inputs = run.read(self, INPUT)
        versions = run.materialize(
            self, "versions", self.step_sql(change, old, combined, inputs)
        )
        return self._appended(run, change, versions)

    def _appended(self, run: Run, change: str, versions: str) -> str:
        """The change, once the input's ``change`` and the group ``versions`` are appended."""
        run.append(self, INPUT, change)
        run.append(self, GROUPS,
                   f"SELECT {column_list(self.state.names)}, {W} FROM ({versions}) AS v")
        return f"SELECT {column_list(self.schema.names)}, {W} FROM ({versions}) AS v"

    def integral(self, run: Run) -> str:
        return self._visible(run.read(self, GROUPS, live=True))

    def integral_at(self, run: Run, at: At) -> str | None:
        return self._visible(run.read(self, GROUPS, at, live=True))  # read, then grouped

    def _visible(self, live: str) -> str:
        """The output's rows of the live group versions ``live``."""
        return f"SELECT {column_list(self.schema.names)}, {W} FROM ({live}) AS __v"

    # -- columns -----------------------------------------------------------------------------

    @cached_property
    def moment_sums(self) -> dict[str, str]:
        """The count and every distinct moment: state column → the SQL of its partial sum
        (``SUM(term · weight)``). Calls with equal moments (SUM, AVG and MAX of one
        column all count its non-NULL values) share the first one's column."""
        sums = {COUNT: f"CAST(SUM((1) * {W}) AS BIGINT)"}  # as COUNT(*)'s moment: shared
        for j, (call, form) in enumerate(zip(self.aggregate.calls, self.forms, strict=True)):
            for moment in form.moments:
                total = _moment_sum(call, moment)
                if total not in sums.values():
                    sums[moment_column(j, moment.name)] = total
        return sums

    def moment_columns(self, j: int) -> dict[str, str]:
        """Call ``j``'s moments' (shared) state columns, by moment name."""
        by_sum = {total: column for column, total in self.moment_sums.items()}
        call = self.aggregate.calls[j]
        return {m.name: by_sum[_moment_sum(call, m)] for m in self.forms[j].moments}

    def _moment_refs(self, j: int, alias: str) -> dict[str, str]:
        """Call ``j``'s moments as (shared) columns of ``alias``, by moment name."""
        return {name: f"{alias}.{quote(c)}" for name, c in self.moment_columns(j).items()}

    @cached_property
    def keeper(self) -> list[int]:
        """Per call, the call that keeps its running state: the first one whose form keeps
        the same (``Running.kept``) over the same argument and FILTER."""
        first: dict[tuple[object, ...], int] = {}
        return [
            first.setdefault((form.kept(), call.arg, call.filter), j)
            for j, (call, form) in enumerate(zip(self.aggregate.calls, self.forms, strict=True))
        ]

    @property
    def keepers(self) -> list[int]:
        """The calls that keep running state (and compute it)."""
        return [j for j, k in enumerate(self.keeper) if j == k]

    def states(self, j: int) -> tuple[tuple[str, str], ...]:
        """Call ``j``'s running state: (name, type)."""
        arg = self.aggregate.calls[j].arg
        return self.forms[j].state(self.aggregate.input.schema.type_of(arg) if arg else "")

    def _refs(self, j: int, alias: str) -> dict[str, str]:
        """Call ``j``'s moments and running state as columns of ``alias``, by name."""
        refs = self._moment_refs(j, alias)
        keeper = self.keeper[j]
        refs.update({n: f"{alias}.{quote(state_column(keeper, n))}" for n, _ in self.states(j)})
        return refs

    def held_names(self) -> list[str]:
        """The state's columns but the visible values: keys, count, moments, running state."""
        return self.state.names[: len(self.state.names) - len(self.aggregate.calls)]

    # -- SQL ---------------------------------------------------------------------------------

    def partials_sql(self, rows: str) -> str:
        """Per group of ``rows`` (a change): its count and moments' partial sums
        (``__d<column>``) and every form's partials."""
        node = self.aggregate
        keys = [quote(k) for k in node.keys]
        parts = [*keys, *(f"{s} AS {quote(summed_column(c))}"
                          for c, s in self.moment_sums.items())]
        for j in self.keepers:
            call, form = node.calls[j], self.forms[j]
            partials = form.partials(quote(call.arg or ""), call_weight(call))
            parts += [f"{sql} AS {quote(partial_column(j, n))}" for n, sql in partials]
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {', '.join(parts)} FROM ({rows}) AS r{group}"

    def combined_sql(self, partials: str, old: str) -> str:
        """Per group of ``partials`` (``partials_sql``): the new held columns, from the
        ``old`` versions, and the flag. In layers, so each expression refers to columns,
        not to copies of other expressions."""
        node = self.aggregate
        keys = list(node.keys)
        added = [f"p.{quote(k)}" for k in keys]
        for column in self.moment_sums:
            summed = quote(summed_column(column))
            total = f"COALESCE(o.{quote(column)}, 0) + COALESCE(p.{summed}, 0)"
            added.append(f"{total} AS {quote(column)}")
        combined, flags = [*map(quote, keys), *map(quote, self.moment_sums)], []
        for j in self.keepers:
            form = self.forms[j]
            olds = {n: quote(_old(state_column(j, n))) for n, _ in self.states(j)}
            added += [f"o.{quote(state_column(j, n))} AS {olds[n]}" for n, _ in self.states(j)]
            part = {n: quote(partial_column(j, n)) for n in form.partial_names()}
            added += [f"p.{c}" for c in part.values()]
            values = form.combine(olds, part, self._moment_refs(j, "a"))
            combined += [
                f"CAST({values[n]} AS {t}) AS {quote(state_column(j, n))}"
                for n, t in self.states(j)
            ]
            flags.append(form.flag(self._refs(j, "c")))
        return (
            f"SELECT *, ({' OR '.join(flags)}) AS {FLAG} FROM ("
            f"SELECT {', '.join(combined)} FROM ("
            f"SELECT {', '.join(added)} FROM ({partials}) AS p LEFT JOIN ({old}) AS o "
            f"ON {null_safe_match(keys, 'p', 'o')}) AS a) AS c"
        )

    def recomputed_sql(self, live: str, by: Sequence[str] | None = None) -> str:
        """Per group of ``live`` (consolidated live rows), the running state from them;
        grouped by the columns ``by`` (the group keys unless given)."""
        node = self.aggregate
        keys = [quote(k) for k in (node.keys if by is None else by)]
        states = []
        for j in self.keepers:
            call, form = node.calls[j], self.forms[j]
            values = form.recompute(quote(call.arg or ""), call_weight(call))
            states += [
                f"CAST({values[n]} AS {t}) AS {quote(state_column(j, n))}"
                for n, t in self.states(j)
            ]
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {', '.join([*keys, *states])} FROM ({live}) AS l{group}"

    def _at_flagged(self, table: str) -> str:
        """The rows of ``table`` (SQL of input rows) of the flagged groups ``f``."""
        keys, names = self.aggregate.keys, self.inputs[0].schema.names
        rows = f"SELECT {column_list(names, 'x')}, x.{W} FROM ({table}) AS x"
        if not keys:
            return f"{rows} WHERE EXISTS (SELECT 1 FROM f)"
        # Keys matched with = (DuckDB then prunes the scan of a sorted input by the few
        # flagged keys); keys holding a NULL apart, null-safely (seldom any: no scan then).
        equal = " AND ".join(f"x.{quote(k)} = f.{quote(k)}" for k in keys)
        some_null = " OR ".join(f"{quote(k)} IS NULL" for k in keys)
        return (
            f"{rows} SEMI JOIN f ON {equal} UNION ALL {rows} SEMI JOIN "
            f"(SELECT * FROM f WHERE {some_null}) AS f ON {null_safe_match(keys, 'x', 'f')}"
        )

    def step_sql(self, delta: str, old: str, combined: str, inputs: str) -> str:
        """This epoch's group versions: old ones with −1, new ones with +1 (see the module).
        ``old``: the live group versions before the epoch at the groups ``delta``
        touches; ``combined``: ``combined_sql`` of them (the flag included); ``inputs``:
        the input's rows before the epoch, at (at least) the groups flagged."""
        node = self.aggregate
        keys = list(node.keys)
        stored, held = self.state.names, self.held_names()
        names = self.inputs[0].schema.names
        if keys:
            flagged = f"SELECT {column_list(keys)} FROM c WHERE {FLAG}"
        else:
            flagged = f"SELECT 1 AS __one FROM c WHERE {FLAG}"
        # Grouped, the input was read at the flagged keys already; global, only if flagged.
        names_w = f"SELECT {column_list(names)}, {W} FROM ({inputs}) AS x"
        read = names_w if keys else self._at_flagged(inputs)
        live = consolidate_sql(
            f"{read} UNION ALL {self._at_flagged('SELECT * FROM d')}",
            names,
            positive_only=True,
        )
        running = [quote(state_column(j, n)) for j in self.keepers for n, _ in self.states(j)]
        new = [
            *(f"c.{quote(c)}" for c in held if quote(c) not in running),
            *(f"CASE WHEN c.{FLAG} THEN r.{c} ELSE c.{c} END AS {c}" for c in running),
            f"c.{FLAG} AS {RECOMPUTED}",
        ]
        values = []
        for j, (call, form) in enumerate(zip(node.calls, self.forms, strict=True)):
            value, type_ = form.finalize(self._refs(j, "n")), node.schema.type_of(call.name)
            values.append(f"CAST({value} AS {type_}) AS {quote(call.name)}")
        exists = f" WHERE n.{COUNT} > 0" if keys else ""
        new_rows = (
            f"SELECT {column_list(held, 'n')}, {', '.join(values)}, 1::BIGINT AS {W}, "
            f"n.{RECOMPUTED} FROM n{exists}"
        )
        old_rows = (
            f"SELECT {column_list(stored)}, -1::BIGINT AS {W}, NULL::BOOLEAN AS {RECOMPUTED} "
            "FROM o"
        )
        ctes = [
            f"d AS ({delta})",
            f"o AS MATERIALIZED ({old})",
            f"c AS ({combined})",
            f"f AS ({flagged})",
            f"r AS ({self.recomputed_sql(live)})",
            f"n AS (SELECT {', '.join(new)} FROM c LEFT JOIN r ON "
            f"{null_safe_match(keys, 'c', 'r')})",
        ]
        return f"WITH {', '.join(ctes)} {old_rows} UNION ALL {new_rows}"
