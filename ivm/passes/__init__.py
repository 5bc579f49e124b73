"""Circuit passes: functions from circuit to circuit, applied in the order of ``PASSES``.

As in sqlglot's optimizer, each pass is given only the keyword options its
signature names (``optimize(circuit, partitioned=True)`` reaches only the passes
that take ``partitioned``).

One pass runs before there is a circuit: ``factorize`` rewrites a view's logical plan
(an aggregate over a join into a tree of partial aggregates), so that both modes
incrementalize the rewritten plan.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ivm.circuit.circuit import Circuit
from ivm.passes.arrange_shared import arrange_shared
from ivm.passes.binary_joins import binary_joins
from ivm.passes.cyclic_joins import cyclic_joins
from ivm.passes.split_global_aggregates import split_global_aggregates
from ivm.passes.split_top_k import split_top_k
from ivm.passes.wide_joins import wide_joins

Pass = Callable[..., Circuit]

PASSES: tuple[Pass, ...] = (
    cyclic_joins, binary_joins, wide_joins, split_top_k, split_global_aggregates, arrange_shared,
)
"""Every circuit pass, in the order they run."""


def optimize(circuit: Circuit, passes: tuple[Pass, ...] = PASSES, **options: Any) -> Circuit:
    """``circuit`` after every pass, each given the options it takes."""
    for step in passes:
        accepted = inspect.signature(step).parameters
        circuit = step(circuit, **{k: v for k, v in options.items() if k in accepted})
    return circuit
