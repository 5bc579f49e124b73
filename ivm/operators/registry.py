"""The registry: which incremental operator maintains each kind of plan node.

Adding an operator means one module (its plan node, its (row, weight) meaning
and its incremental form) and one line in ``REGISTRY``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ivm.operators.aggregate import Aggregate, LocalAggregate
from ivm.operators.arrange import Arrange, Arrangement
from ivm.operators.asof_join import AsOfJoin, IncrementalAsOfJoin
from ivm.operators.base import Describe, Operator
from ivm.operators.difference import Difference, DifferenceOperator
from ivm.operators.distinct import Distinct, IncrementalDistinct
from ivm.operators.distinct_on import DistinctOn, FirstPerKey
from ivm.operators.filter import Filter, FilterOperator
from ivm.operators.flat_map import FlatMap, FlatMapOperator
from ivm.operators.group_recompute import GroupRecompute
from ivm.operators.guard import Guard, IncrementalGuard
from ivm.operators.invertible_aggregate import InvertibleAggregate
from ivm.operators.join import DeltaJoin, Join
from ivm.operators.nested_run import FeedbackSource, ImportSource
from ivm.operators.product import Product, RecomputedProduct
from ivm.operators.project import Project, ProjectOperator
from ivm.operators.recursive import Feedback, Imported
from ivm.operators.running_aggregate import RunningAggregate
from ivm.operators.scan import Scan, Source
from ivm.operators.set_operation import IncrementalSetOperation, SetOperation
from ivm.operators.temporal_join import (
    Differentiate,
    DifferentiateOperator,
    Integrate,
    IntegrateOperator,
    LockedJoin,
    TemporalJoin,
)
from ivm.operators.top_k import IncrementalTopK, TopK
from ivm.operators.union_all import UnionAll, UnionAllOperator
from ivm.operators.values import Constant, Values
from ivm.operators.window import Window, WindowOperator
from ivm.plan.node import Plan

Factory = Callable[[Plan, tuple[Operator, ...], Describe], Operator]
"""Builds a node's operator over its inputs' operators (``Describe`` types state)."""


def _plain(kind: type[Operator]) -> Factory:
    return lambda node, inputs, _describe: kind(node, inputs)


def _aggregate(node: Plan, inputs: tuple[Operator, ...], describe: Describe) -> Operator:
    """Group versions when every call is invertible; running group state, recomputing a
    group from its rows only when flagged, when every call is invertible or running;
    else a per-key recompute of every touched group."""
    assert isinstance(node, Aggregate)
    forms = node.invertible_forms()
    if forms is not None:
        return InvertibleAggregate.build(node, inputs, forms, describe)
    running = RunningAggregate.forms_for(node)
    if running is not None:
        return RunningAggregate.build(node, inputs, running, describe)
    return GroupRecompute.build(node, inputs, describe)


REGISTRY: Mapping[type[Plan], Factory] = {
    Scan: _plain(Source),
    Filter: _plain(FilterOperator),
    Project: _plain(ProjectOperator),
    UnionAll: _plain(UnionAllOperator),
    Difference: _plain(DifferenceOperator),
    Join: _plain(DeltaJoin),
    Product: _plain(RecomputedProduct),
    Aggregate: _aggregate,
    LocalAggregate: _aggregate,
    Distinct: _plain(IncrementalDistinct),
    SetOperation: _plain(IncrementalSetOperation),
    Guard: _plain(IncrementalGuard),
    Values: _plain(Constant),
    FlatMap: _plain(FlatMapOperator),
    TopK: _plain(IncrementalTopK),
    Arrange: _plain(Arrangement),
    Window: _plain(WindowOperator),
    DistinctOn: _plain(FirstPerKey),
    AsOfJoin: _plain(IncrementalAsOfJoin),
    Differentiate: _plain(DifferentiateOperator),
    TemporalJoin: _plain(LockedJoin),
    Integrate: _plain(IntegrateOperator),
    Feedback: _plain(FeedbackSource),
    Imported: _plain(ImportSource),
}


def operator_for(node: Plan, inputs: tuple[Operator, ...], describe: Describe) -> Operator:
    """The incremental operator of ``node`` over ``inputs`` (its children's operators)."""
    factory = REGISTRY.get(type(node))
    if factory is None:
        raise TypeError(f"no incremental operator is registered for {type(node).__name__}")
    return factory(node, inputs, describe)
