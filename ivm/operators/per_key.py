"""The per-key operator: for each key a change touches, f(group after) − f(group before).

Meaning: a function f from one group (the input rows sharing a key, with their
multiplicities) to any number of output rows; the output is the union of
f(group) over every key with rows. Aggregates with a non-invertible function
give one row per key; window functions one row per input row of the key's partition
(``window``), DISTINCT ON the key's first row (``distinct_on``); top-k and ASOF joins
are to be its further users (the shape of Feldera's group transformers).

State, both partitioned and sorted by the key:

* ``input``: the input's integral (its rows with weights);
* ``output``: the output's integral, so f(group before) is read, not recomputed.

Per epoch, with K the keys of the consolidated input change:

    new    = f(live rows of (input ⊎ change) at K)
    change = new − output at K

Only rows at the touched keys are read (semi-joins on K); the input change is
appended to ``input`` and the output change to ``output``. A global group (no
key) is touched by any change and reads everything. A user defines its key
(``keys``, input columns; ``output_keys``, the same values as output columns)
and ``group_sql``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ivm.operators.base import Operator, Run, TraceSpec
from ivm.plan.sql import W, at_keys_sql, column_list, consolidate_sql, null_safe_match, quote

INPUT = "input"
OUTPUT = "output"


@dataclass(frozen=True, eq=False)
class PerKey(Operator):
    """Base of per-key operators: subclasses give ``keys`` and ``group_sql``."""

    kind = "per_key"

    @property
    def keys(self) -> tuple[str, ...]:
        """Input columns that form the key (empty: one global group)."""
        raise NotImplementedError(type(self).__name__)

    @property
    def output_keys(self) -> tuple[str, ...]:
        """Output columns holding the key's values, aligned with ``keys``."""
        return self.keys

    def group_sql(self, live: str) -> str:
        """Output rows (the operator's columns and ``__w``) of the groups in ``live``:
        consolidated input rows, each with a positive weight, of whole groups."""
        raise NotImplementedError(type(self).__name__)

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        return (
            TraceSpec(INPUT, self.inputs[0].schema, self.keys),
            TraceSpec(OUTPUT, self.schema, self.output_keys),
        )

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (self.keys,)

    def output_key(self) -> tuple[str, ...] | None:
        return self.output_keys

    # -- computation -------------------------------------------------------------------------

    def change(self, run: Run) -> str | None:
        delta = run.change(self.inputs[0]) if self.keys else self.global_input_change(run)
        if delta is None:
            return None
        names = self.inputs[0].schema.names
        change = run.materialize(self, "delta", consolidate_sql(delta, names))
        inputs, outputs = run.trace(self, INPUT), run.trace(self, OUTPUT)
        output = run.materialize(self, "output", self.step_sql(change, inputs, outputs))
        run.append(inputs, change)
        run.append(outputs, output)
        return output

    def integral(self, run: Run) -> str:
        return self._live_output(run, "")

    def integral_at(self, run: Run, column: str, keys: str) -> str | None:
        return self._live_output(run, at_keys_sql(column, keys))  # filtered, then grouped

    def _live_output(self, run: Run, where: str) -> str:
        rows = f"SELECT * FROM {run.trace(self, OUTPUT)} {where}"
        return consolidate_sql(rows, self.schema.names, positive_only=True)

    def step_sql(self, change: str, inputs: str, outputs: str) -> str:
        """The output change for the keys ``change`` touches (see the module docstring)."""
        names = self.inputs[0].schema.names
        out = self.schema.names
        if self.keys:
            at_input = f" SEMI JOIN k ON {null_safe_match(self.keys, 't', 'k')}"
            at_output = " SEMI JOIN k ON " + " AND ".join(
                f"t.{quote(o)} IS NOT DISTINCT FROM k.{quote(i)}"
                for o, i in zip(self.output_keys, self.keys, strict=True)
            )
            touched = f"k AS (SELECT DISTINCT {column_list(self.keys)} FROM ({change}) AS c), "
        else:
            at_input = at_output = touched = ""
        live = consolidate_sql(
            f"SELECT {column_list(names, 't')}, t.{W} FROM {inputs} AS t{at_input} "
            f"UNION ALL SELECT {column_list(names)}, {W} FROM ({change}) AS c",
            names,
            positive_only=True,
        )
        old = (
            f"SELECT {column_list(out, 't')}, -t.{W} AS {W} FROM {outputs} AS t{at_output}"
        )
        return (
            f"WITH {touched}live AS ({live}), new AS ({self.group_sql('SELECT * FROM live')}) "
            + consolidate_sql(
                f"SELECT {column_list(out)}, {W} FROM new UNION ALL {old}", out
            )
        )
