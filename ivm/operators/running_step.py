"""A running aggregate's step in memory: partial sums in one statement, the rest in Arrow.

``ivm.operators.running_aggregate`` steps its group versions in two statements (the
combined state and flags, then the versions, with the flagged groups' rows). With the
versions arranged (an embedded epoch), the step here does the same work with one
statement for the change's partials and their key hashes: the touched groups' old
versions are looked up in their arrangement, the new moments added word by word
(``ivm.operators.invertible_step``), each running form combined, flagged and finalized
by its Arrow twin (``ivm.functions.running_values``); only when some group is flagged
does a second statement recompute the flagged groups' state from their live rows (the
input's arrangement looked up at their keys, and the change's rows). The versions are
then one scratch table, exactly the rows the statements give, ``RECOMPUTED`` included.
``InMemory.UNDECIDED`` wherever a lookup or a type cannot decide: the statements step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ivm.functions.running_values import combined, flagged, value
from ivm.operators.base import Run
from ivm.operators.invertible_aggregate import COUNT, KEY_HASH, InMemory
from ivm.operators.invertible_step import moment_sum
from ivm.plan.sql import W, column_list, consolidate_sql, null_safe_match
from ivm.schema import quote
from ivm.storage.distinct import all_distinct
from ivm.storage.sqltext import WEIGHT, key_hash_sql

if TYPE_CHECKING:
    from ivm.operators.running_aggregate import RunningAggregate

GROUPS = "groups"
INPUT = "input"
RECOMPUTED = "__recomputed"
"""Column of the versions' scratch table: the new version was recomputed from rows."""
GROUP = "__ivm_g"
"""Column of the flagged groups' rows: the group's position in the change's partials."""


def state_column(index: int, name: str) -> str:
    """State column of running state ``name`` of call ``index``."""
    return f"__s{index}_{name}"


def partial_column(index: int, name: str) -> str:
    """Column of partial ``name`` of call ``index`` over a change."""
    return f"__p{index}_{name}"


def summed_column(column: str) -> str:
    """A change's partial sum of count or moment ``column``."""
    return f"__d{column}"


def stepped_in_memory(op: RunningAggregate, run: Run, change: str) -> str | InMemory:
    """SQL of this epoch's group versions (a scratch table), stepped in memory from the
    consolidated ``change``; ``InMemory`` when there is nothing to step or the
    statements must (see the module docstring)."""
    keys = list(op.aggregate.keys)
    partials = run.fetch(op, hashed_partials_sql(op, change))
    if partials.num_rows == 0:
        return InMemory.NO_GROUP
    groups = partials.num_rows
    hashes = partials.column(KEY_HASH).to_numpy()
    found = run.lookup(op, GROUPS, partials.select(keys), hashes)
    if found is None:
        return InMemory.UNDECIDED
    old, at = found
    if np.any(old.column(WEIGHT).to_numpy() != 1) or not all_distinct(at):
        return InMemory.UNDECIDED  # not one live version per group
    position = np.full(groups, -1, np.int64)
    position[at] = np.arange(len(at))
    gather = pa.array(position, mask=position < 0)

    def aligned(column: str) -> pa.Array:
        return old.column(column).combine_chunks().take(gather)

    new = _moments(op, partials, old, at)
    if new is None:
        return InMemory.UNDECIDED
    flags = np.zeros(groups, bool)
    for j in op.keepers:
        form = op.forms[j]
        moments = {name: new[c] for name, c in op.moment_columns(j).items()}
        before = {n: aligned(state_column(j, n)) for n, _ in op.states(j)}
        part = {n: partials.column(partial_column(j, n)).combine_chunks()
                for n in form.partial_names()}
        state = combined(form, before, part, moments)
        if state is None:
            return InMemory.UNDECIDED
        new.update({state_column(j, n): array for n, array in state.items()})
        flags |= flagged(form, {**moments, **state}, groups)
    if flags.any():
        recomputed = _recomputed(op, run, change, partials, hashes, np.flatnonzero(flags), new)
        if recomputed is None:
            return InMemory.UNDECIDED
        new.update(recomputed)
    for j, call in enumerate(op.aggregate.calls):
        result = _value(op, j, new)
        if result is None:
            return InMemory.UNDECIDED
        new[call.name] = result
    for k in keys:
        new[k] = partials.column(k).combine_chunks()
    return _versions(op, run, old, new, flags)


def _moments(
    op: RunningAggregate, partials: pa.Table, old: pa.Table, at: np.ndarray
) -> dict[str, pa.Array] | None:
    """Each touched group's new count and moments: its old version's plus the change's
    partial sums (``ivm.operators.invertible_step.moment_sum``; its errors name the call)."""
    labels = {COUNT: "the group's row count"}
    for j, call in enumerate(op.aggregate.calls):
        for c in op.moment_columns(j).values():
            labels.setdefault(c, f"{call.func.upper()} of a group")
    new: dict[str, pa.Array] = {}
    for column in op.moment_sums:
        total = moment_sum(labels.get(column, column), partials.column(summed_column(column)),
                           old.column(column), at, partials.num_rows)
        if total is None:
            return None
        new[column] = total
    return new


def _value(op: RunningAggregate, j: int, new: dict[str, pa.Array]) -> pa.Array | None:
    """Call ``j``'s values from its moments and its keeper's running state."""
    refs = {name: new[c] for name, c in op.moment_columns(j).items()}
    refs.update({n: new[state_column(op.keeper[j], n)] for n, _ in op.states(j)})
    return value(op.forms[j], refs)


def hashed_partials_sql(op: RunningAggregate, rows: str) -> str:
    """``op.partials_sql`` with the keys typed as the state's, the extremes' copy counts
    as BIGINT, and the keys' hash (``KEY_HASH``), as the groups are arranged."""
    keys = op.aggregate.keys
    counts = {partial_column(j, n) for j in op.keepers for n in ("ic", "dn", "in")}
    columns = [f"CAST(p.{quote(k)} AS {op.state.type_of(k)}) AS {quote(k)}" for k in keys]
    columns += [f"p.{quote(summed_column(c))}" for c in op.moment_sums]
    for j in op.keepers:
        for n in op.forms[j].partial_names():
            name = quote(partial_column(j, n))
            cast = partial_column(j, n) in counts
            columns.append(f"CAST(p.{name} AS BIGINT) AS {name}" if cast else f"p.{name}")
    typed = f"SELECT {', '.join(columns)} FROM ({op.partials_sql(rows)}) AS p"
    return f"SELECT *, {key_hash_sql(keys, '__t')} AS {KEY_HASH} FROM ({typed}) AS __t"


def _recomputed(
    op: RunningAggregate, run: Run, change: str, partials: pa.Table, hashes: np.ndarray,
    flagged_at: np.ndarray, new: dict[str, pa.Array],
) -> dict[str, pa.Array] | None:
    """The running state of every group (``new``'s), the flagged ones (at positions
    ``flagged_at``) recomputed from their live rows: the input's, looked up, and the
    change's. None where a recomputed column does not cast to the state's type."""
    keys = list(op.aggregate.keys)
    wanted = partials.select(keys).take(flagged_at)
    found = run.lookup(op, INPUT, wanted, hashes[flagged_at])
    if found is None:
        return None
    rows, at = found
    names = op.inputs[0].schema.names
    stored = run.relation(op, "flagged_rows",
                          rows.append_column(GROUP, pa.array(flagged_at[at], pa.int64())))
    targets = run.relation(op, "flagged",
                           wanted.append_column(GROUP, pa.array(flagged_at, pa.int64())))
    changed = (
        f"SELECT {column_list(names, 'x')}, x.{W}, f.{GROUP} FROM ({change}) AS x "
        f"JOIN ({targets}) AS f ON {null_safe_match(keys, 'x', 'f')}"
    )
    live = consolidate_sql(
        f"SELECT {column_list(names)}, {W}, {GROUP} FROM ({stored}) AS s UNION ALL {changed}",
        [*names, GROUP],
        positive_only=True,
    )
    fresh = run.fetch(op, op.recomputed_sql(live, by=[GROUP]))
    groups = len(partials)
    slots = np.arange(groups)
    slots[flagged_at] = groups + len(fresh)  # a flagged group without live rows: NULL
    slots[fresh.column(GROUP).to_numpy()] = groups + np.arange(len(fresh))
    merged = {}
    for j in op.keepers:
        for n, _ in op.states(j):
            column = state_column(j, n)
            kept = new[column]
            try:
                recomputed = fresh.column(column).combine_chunks().cast(kept.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            every = pa.concat_arrays([kept, recomputed, pa.nulls(1, kept.type)])
            merged[column] = every.take(pa.array(slots))
    return merged


def _versions(
    op: RunningAggregate, run: Run, old: pa.Table, new: dict[str, pa.Array], flags: np.ndarray
) -> str:
    """The versions' scratch table: ``old`` with −1, the new versions of groups left
    with rows with +1 (``RECOMPUTED`` where flagged)."""
    names = op.state.names
    keep = np.flatnonzero(new[COUNT].to_numpy(zero_copy_only=False) > 0)
    added = pa.table(
        [*(new[n].take(keep) for n in names), pa.array(np.ones(len(keep), np.int64)),
         pa.array(flags[keep])],
        [*names, WEIGHT, RECOMPUTED],
    )
    removed = old.select(names).append_column(WEIGHT, pa.array(np.full(old.num_rows, -1, np.int64)))
    removed = removed.append_column(RECOMPUTED, pa.nulls(old.num_rows, pa.bool_()))
    typed = ", ".join(f"CAST({quote(c.name)} AS {c.type}) AS {quote(c.name)}"
                      for c in op.state.columns)
    rows = [f"SELECT {typed}, {W}, {RECOMPUTED} FROM ({run.relation(op, part, table)}) AS v"
            for part, table in (("old", removed), ("new", added))]
    return run.materialize(op, "versions", " UNION ALL ".join(rows))

