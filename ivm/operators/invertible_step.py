"""An invertible aggregate's step computed in memory, from Arrow, without a statement.

``ivm.operators.invertible_aggregate`` steps its group versions in one DuckDB statement
(the change's partial sums joined with the old versions, then the values). With the
partial sums already in Arrow and the old versions looked up in its arrangement, the
step is a few vectorized additions: each group's new moments are its old ones plus
the partials (128-bit sums added word by word, refused past their type's range as
DuckDB refuses them), its values follow from the moments (``Invertible.compute``), and
the rows are the old versions with weight −1 and the new ones (groups left with rows)
with weight +1, exactly the rows the statement gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ivm.errors import ExecutionError
from ivm.functions.moments import Invertible
from ivm.functions.wide_integers import Wide, is_wide
from ivm.storage.distinct import all_distinct
from ivm.storage.sqltext import WEIGHT

DECIMAL_LIMIT = 10**38
"""Exact sums of decimals are DECIMAL(38, s): DuckDB refuses an addition past 10³⁸ (and
one of HUGEINTs past 2¹²⁷)."""


@dataclass(frozen=True)
class Call:
    """One aggregate call as the step computes it: its output column, its form, the
    state column of each of its moments (by moment name) and its function's name
    (errors name it)."""

    name: str
    form: Invertible
    moments: dict[str, str]
    function: str = ""


def stepped_versions(
    keys: Sequence[str],
    count: str,
    moments: Sequence[str],
    calls: Sequence[Call],
    state: Sequence[str],
    partials: pa.Table,
    old: pa.Table,
    at: np.ndarray,
) -> pa.Table | None:
    """The epoch's group versions (``state``'s columns and the weight): ``old`` (the live
    versions of the touched groups, each the version of group ``partials[at[i]]``) with
    −1, and each group's new version with +1 where its ``count`` stays positive (without
    ``keys``, a global aggregate: its one row, always).
    ``partials``: per touched group, its keys and the change's partial sum of each of
    ``moments`` (``count`` first). None when a moment or value has a type this step does
    not handle (the statement computes the step then)."""
    groups = partials.num_rows
    weights = old.column(WEIGHT).to_numpy()
    if np.any(weights != 1) or not all_distinct(at):
        return None  # not one live version per group: leave it to the statement
    labels = {c: f"{call.function} of a group" for call in calls for c in call.moments.values()}
    labels[count] = "the group's row count"
    new: dict[str, pa.Array] = {}
    for name in moments:
        label = labels.get(name, name)
        total = moment_sum(label, partials.column(name), old.column(name), at, groups)
        if total is None:
            return None
        new[name] = total
    for call in calls:
        assert call.form.compute is not None
        value = call.form.compute({m: new[c] for m, c in call.moments.items()})
        if value is None:
            return None
        new[call.name] = value
    # A group exists while it has rows; a global aggregate's single row always exists.
    counts = new[count].to_numpy()
    keep = np.flatnonzero(counts > 0) if keys else np.arange(len(counts))
    for name in keys:
        new[name] = partials.column(name).combine_chunks()
    columns = [new[name].take(keep) for name in state]
    added = pa.table([*columns, pa.array(np.ones(len(keep), np.int64))], [*state, WEIGHT])
    removed = old.select([*state, WEIGHT])
    removed = removed.set_column(
        len(state), WEIGHT, pa.array(np.full(old.num_rows, -1, np.int64))
    )
    if removed.schema != added.schema:
        try:
            removed = removed.cast(added.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return pa.concat_tables([removed, added])


def moment_sum(
    label: str, partial: pa.ChunkedArray, old: pa.ChunkedArray, at: np.ndarray, groups: int
) -> pa.Array | None:
    """Each group's new value of a moment: the change's partial sum plus the old
    version's (zero for a new group; a NULL partial sum, of no non-NULL values, is zero).
    ``label``: what the moment is kept for, in the view's terms (errors name it)."""
    if pa.types.is_int64(partial.type) and pa.types.is_int64(old.type):
        mine = partial.fill_null(0).to_numpy()
        before = np.zeros(groups, np.int64)
        before[at] = old.fill_null(0).to_numpy()
        total = mine + before  # wraps silently: checked below
        if bool(np.any(((mine < 0) == (before < 0)) & ((total < 0) != (mine < 0)))):
            raise ExecutionError(f"{label} is out of range of BIGINT")
        return pa.array(total, pa.int64())
    if not (is_wide(partial.type) and old.type == partial.type):
        return None
    total, wrapped = Wide.of(partial).plus(Wide.of(old).scattered(at, groups))
    decimal = pa.types.is_decimal(partial.type)
    if bool(wrapped.any()) or (decimal and bool(total.beyond(DECIMAL_LIMIT).any())):
        kept_as = f"DECIMAL(38,{partial.type.scale})" if decimal else "HUGEINT"
        raise ExecutionError(f"{label} is out of range of {kept_as}")
    return total.array(partial.type)
