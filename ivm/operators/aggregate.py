"""Incremental GROUP BY.

Meaning: for each group g of the input (rows with positive net weight), one
output row (g, f₁(g), …) with weight 1. A global aggregate (no keys) has exactly
one output row, even over an empty input (COUNT 0, other aggregates NULL).

State: a trace of *group versions*, partitioned by the group keys. Each row
holds the keys, the group's row count ``__cnt``, per invertible aggregate its
running sum ``__s<j>`` and count of non-NULL arguments ``__n<j>``, and the
visible output values. An epoch appends, for every touched group, the old
version with weight −1 and the new version with weight +1; consolidation
(compaction) leaves one live version per group. The view-facing change is
exactly those ±1 rows projected to keys and visible values.

Per epoch:

* COUNT, and SUM/AVG over exact types (integers, DECIMAL): invertible — new
  state = old state + the delta's partial sums.
* MIN/MAX, and SUM/AVG over floating point: per-key recompute — for touched
  groups, the value over the input's new integral (old integral ⊎ delta, rows
  with positive weight). Deleting the current extreme is right, and a float sum
  is never the result of subtracting what was added (NaN, ±inf and cancellation
  such as 1e17 + 1 − 1e17 would make it wrong).
"""

from __future__ import annotations

from dataclasses import dataclass

from ivm.plan.nodes import AggregateCall
from ivm.plan.sql import W, column_list, null_safe_match, union_all_sql
from ivm.schema import Column, Schema, quote

COUNT = "__cnt"
INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
)
FLOAT_TYPES = frozenset({"FLOAT", "REAL", "DOUBLE", "FLOAT4", "FLOAT8"})


@dataclass(frozen=True)
class AggregateShape:
    """What the SQL of one aggregate operator needs to know."""

    keys: tuple[str, ...]
    calls: tuple[AggregateCall, ...]
    output: Schema  # keys then call names, with DuckDB's types for them
    arguments: Schema  # the input's columns (aggregate arguments among them)

    def maintained(self, call: AggregateCall) -> bool:
        """True when ``call`` is updated from the change alone (exact and invertible)."""
        if not call.invertible:
            return False
        if call.func in ("sum", "avg"):
            return self.arguments.type_of(call.arg or "").upper() not in FLOAT_TYPES
        return True

    @property
    def recomputed(self) -> tuple[AggregateCall, ...]:
        """Calls recomputed per touched key from the input's integral."""
        return tuple(c for c in self.calls if not self.maintained(c))

    def state_columns(self) -> list[str]:
        """Columns of the state trace, weight excluded, in order."""
        columns = [*self.keys, COUNT]
        for j, call in enumerate(self.calls):
            if not self.maintained(call):
                continue
            if call.func in ("count", "sum", "avg"):
                columns.append(f"__n{j}")
            if call.func in ("sum", "avg"):
                columns.append(f"__s{j}")
        columns += [c.name for c in self.calls]
        return columns


def _partials(shape: AggregateShape) -> list[str]:
    parts = [f"SUM({W})::BIGINT AS {COUNT}"]
    for j, call in enumerate(shape.calls):
        arg = quote(call.arg or "")
        if not shape.maintained(call):
            continue
        if call.func in ("count", "sum", "avg"):
            parts.append(f"SUM(CASE WHEN {arg} IS NULL THEN 0 ELSE {W} END)::BIGINT AS __n{j}")
        if call.func in ("sum", "avg"):
            # Integer sums are HUGEINT in DuckDB; widen before weighting so n·x cannot overflow.
            type_ = shape.arguments.type_of(call.arg or "").upper()
            if type_ in INTEGER_TYPES or type_ == "BOOLEAN":
                arg = f"CAST({arg} AS HUGEINT)"
            parts.append(f"SUM({arg} * {W}) AS __s{j}")
    return parts


def _combined(shape: AggregateShape) -> list[str]:
    """New state columns: old state plus the delta's partials (a NULL old means no group)."""
    parts = [f"COALESCE(o.{COUNT}, 0) + COALESCE(p.{COUNT}, 0) AS {COUNT}"]
    for j, call in enumerate(shape.calls):
        if not shape.maintained(call):
            continue
        n = f"(COALESCE(o.__n{j}, 0) + COALESCE(p.__n{j}, 0))"
        if call.func in ("count", "sum", "avg"):
            parts.append(f"{n} AS __n{j}")
        if call.func in ("sum", "avg"):
            parts.append(
                f"CASE WHEN {n} = 0 THEN NULL WHEN o.__s{j} IS NULL THEN p.__s{j} "
                f"WHEN p.__s{j} IS NULL THEN o.__s{j} ELSE o.__s{j} + p.__s{j} END AS __s{j}"
            )
    return parts


def _visible(shape: AggregateShape) -> list[str]:
    """Visible output values from the new state (``n``) and the recomputed values (``m``)."""
    parts = []
    for j, call in enumerate(shape.calls):
        type_ = shape.output.type_of(call.name)
        if not shape.maintained(call):
            value = f"m.{quote(call.name)}"
        elif call.func == "count_star":
            value = f"n.{COUNT}"
        elif call.func == "count":
            value = f"n.__n{j}"
        elif call.func == "sum":
            value = f"n.__s{j}"
        else:
            value = f"CAST(n.__s{j} AS DOUBLE) / n.__n{j}"
        parts.append(f"CAST({value} AS {type_}) AS {quote(call.name)}")
    return parts


def _recomputed_value(call: AggregateCall) -> str:
    """``call`` over consolidated live rows, each standing for ``__w`` copies."""
    arg = quote(call.arg or "")
    if call.func in ("min", "max"):
        return f"{call.func.upper()}({arg})"
    total = f"SUM({arg} * {W})"
    if call.func == "sum":
        return total
    return f"{total} / SUM(CASE WHEN {arg} IS NULL THEN NULL ELSE {W} END)"


def _recomputed_sql(shape: AggregateShape, input_new: str) -> str:
    """Per touched group, the recomputed calls over the live rows of the input's new integral."""
    args = sorted({c.arg for c in shape.recomputed if c.arg})
    grouping = column_list([*shape.keys, *args])
    live = (
        f"SELECT {grouping}, SUM({W}) AS {W} FROM ({input_new}) AS x "
        + (f"SEMI JOIN p ON {null_safe_match(shape.keys, 'x', 'p')} " if shape.keys else "")
        + f"GROUP BY {grouping} HAVING SUM({W}) > 0"
    )
    values = [f"{_recomputed_value(c)} AS {quote(c.name)}" for c in shape.recomputed]
    group = f" GROUP BY {column_list(shape.keys)}" if shape.keys else ""
    return f"SELECT {', '.join([*map(quote, shape.keys), *values])} FROM ({live}) AS l{group}"


def aggregate_step_sql(
    shape: AggregateShape,
    delta: str,
    state: str,
    input_old: str,
) -> str:
    """SQL whose rows are this epoch's group versions: old ones with −1, new ones with +1.

    ``delta`` is the input's change, ``state`` the state trace table, ``input_old`` the
    input's integral before this epoch (read only for recomputed calls).
    """
    keys = list(shape.keys)
    state_cols = shape.state_columns()
    ctes = [
        f"p AS ({partials_sql(shape, delta)})",
        "o AS (SELECT {cols} FROM {state} AS s{semi} GROUP BY ALL HAVING SUM({w}) > 0)".format(
            cols=column_list(state_cols, "s"),
            state=state,
            semi=f" SEMI JOIN p ON {null_safe_match(keys, 's', 'p')}" if keys else "",
            w=W,
        ),
        "n AS (SELECT {cols} FROM p {join} o ON {on})".format(
            cols=", ".join([*(f"p.{quote(k)}" for k in keys), *_combined(shape)]),
            join="LEFT JOIN",
            on=null_safe_match(keys, "p", "o"),
        ),
    ]
    if shape.recomputed:
        ctes.append(f"m AS ({_recomputed_sql(shape, union_all_sql([input_old, delta]))})")
    new_state = [f"n.{quote(c)}" for c in state_cols if c not in {k.name for k in shape.calls}]
    recomputed = shape.recomputed
    m_join = f" LEFT JOIN m ON {null_safe_match(keys, 'n', 'm')}" if recomputed else ""
    # A group exists while it has rows; a global aggregate's single row always exists.
    exists = f" WHERE n.{COUNT} > 0" if keys else ""
    new_rows = (
        f"SELECT {', '.join([*new_state, *_visible(shape)])}, 1::BIGINT AS {W} "
        f"FROM n{m_join}{exists}"
    )
    old_rows = f"SELECT {column_list(state_cols)}, -1::BIGINT AS {W} FROM o"
    return f"WITH {', '.join(ctes)} {old_rows} UNION ALL {new_rows}"


def visible_sql(shape: AggregateShape, versions: str) -> str:
    """The output change (or integral) from group versions: keys and values with weights."""
    names = shape.output.names
    return f"SELECT {column_list(names)}, {W} FROM ({versions}) AS v"


def snapshot_sql(shape: AggregateShape, state: str) -> str:
    """The aggregate's output integral read from its state trace."""
    names = column_list(shape.output.names)
    return (
        f"SELECT {names}, SUM({W})::BIGINT AS {W} FROM {state} GROUP BY {names} HAVING SUM({W}) > 0"
    )


def partials_sql(shape: AggregateShape, delta: str) -> str:
    """Per group of ``delta``: its weight sum and the partial sums of invertible aggregates."""
    keys = list(shape.keys)
    group = f" GROUP BY {column_list(keys)}" if keys else ""
    return f"SELECT {', '.join([*map(quote, keys), *_partials(shape)])} FROM ({delta}) AS d{group}"


def state_schema(shape: AggregateShape, partials: Schema) -> Schema:
    """Columns of the state trace, typed from the partials' schema and the output schema."""
    visible = {c.name for c in shape.calls}
    columns = []
    for name in shape.state_columns():
        source = shape.output if name in visible else partials
        columns.append(Column(name, source.type_of(name)))
    return Schema(tuple(columns))
