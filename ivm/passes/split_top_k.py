"""Pass: a global TopK becomes a TopK in each partition, merged by a global TopK.

A TopK needs all its input in one place. Partitioned, that place would hold the
whole input's trace. Instead each partition (its input hashed by whole row, so
copies of a row meet) keeps the top m + n rows of its own share, and only those
reach the one partition that merges them into the rows ranked m+1 … m+n: the
global top m + n rows are each in their partition's top m + n, so the result is
the same. The merging TopK's state holds at most m + n rows per partition.

Only partitioned execution (Spark mode) asks for it: embedded mode keeps one TopK.
"""

from __future__ import annotations

import dataclasses

from ivm.circuit.circuit import Circuit
from ivm.operators.base import Operator
from ivm.operators.top_k import IncrementalTopK


def split_top_k(circuit: Circuit, partitioned: bool = False) -> Circuit:
    """``circuit`` with every global TopK split into per-partition TopKs and a merge
    (only when ``partitioned``)."""
    if not partitioned:
        return circuit
    return circuit.rewrite(_split)


def _split(op: Operator) -> Operator:
    if not isinstance(op, IncrementalTopK) or op.top_k.local:
        return op
    node = op.top_k
    local = dataclasses.replace(node, limit=node.limit + node.offset, offset=0, local=True)
    below = IncrementalTopK(local, op.inputs)
    return IncrementalTopK(node.with_children([local]), (below,))
