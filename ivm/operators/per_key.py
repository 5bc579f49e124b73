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

from ivm.operators.base import At, Operator, Run, TraceSpec
from ivm.plan.sql import W, column_list, consolidate_sql

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
        touched = f"SELECT DISTINCT {column_list(self.keys)} FROM ({change}) AS c"
        inputs = run.read(self, INPUT, At(self.keys, touched) if self.keys else None)
        outputs = run.read(self, OUTPUT, At(self.output_keys, touched) if self.keys else None)
        output = run.materialize(self, "output", self.step_sql(change, inputs, outputs))
        run.append(self, INPUT, change)
        run.append(self, OUTPUT, output)
        return output

    def integral(self, run: Run) -> str:
        return run.read(self, OUTPUT, live=True)

    def integral_at(self, run: Run, at: At) -> str | None:
        return run.read(self, OUTPUT, at, live=True)  # read at the keys, then grouped

    def step_sql(self, change: str, inputs: str, outputs: str) -> str:
        """The output change for the keys ``change`` touches (see the module docstring):
        ``inputs`` and ``outputs`` are the traces' rows at (at least) those keys."""
        names = self.inputs[0].schema.names
        out = self.schema.names
        live = consolidate_sql(
            f"SELECT {column_list(names)}, {W} FROM ({inputs}) AS t "
            f"UNION ALL SELECT {column_list(names)}, {W} FROM ({change}) AS c",
            names,
            positive_only=True,
        )
        old = f"SELECT {column_list(out)}, -{W} AS {W} FROM ({outputs}) AS t"
        return (
            f"WITH live AS ({live}), new AS ({self.group_sql('SELECT * FROM live')}) "
            + consolidate_sql(
                f"SELECT {column_list(out)}, {W} FROM new UNION ALL {old}", out
            )
        )
