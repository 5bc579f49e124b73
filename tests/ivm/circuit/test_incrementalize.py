"""ivm.circuit.incrementalize: plan nodes become the operators their kind registers.

Plans are built by hand; DuckDB only types the state of invertible aggregates.
"""

from __future__ import annotations

import duckdb
from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe
from ivm.operators.aggregate import Aggregate, AggregateCall, LocalAggregate
from ivm.operators.arrange import Arrange
from ivm.operators.asof_join import AsOfJoin
from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct, IncrementalDistinct
from ivm.operators.distinct_on import DistinctOn
from ivm.operators.filter import Filter, FilterOperator
from ivm.operators.flat_map import FlatMap
from ivm.operators.group_recompute import GroupRecompute
from ivm.operators.guard import Guard
from ivm.operators.invertible_aggregate import InvertibleAggregate
from ivm.operators.join import DeltaJoin, Join
from ivm.operators.product import Product
from ivm.operators.project import Project, ProjectOperator
from ivm.operators.recursive import Feedback, Imported
from ivm.operators.registry import REGISTRY
from ivm.operators.running_aggregate import RunningAggregate
from ivm.operators.scan import Scan, Source
from ivm.operators.set_operation import SetOperation
from ivm.operators.temporal_join import Differentiate, Integrate, TemporalJoin
from ivm.operators.top_k import TopK
from ivm.operators.union_all import UnionAll, UnionAllOperator
from ivm.operators.values import Values
from ivm.operators.window import Window
from ivm.plan.node import Plan
from ivm.schema import Column, Schema

_CON = duckdb.connect()


def build(plan: Plan, view: str = "v") -> Circuit:
    return incrementalize(plan, view, lambda sql: describe(_CON, sql))


def schema(*names: str, type_: str = "BIGINT") -> Schema:
    return Schema(tuple(Column(n, type_) for n in names))


def ref(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def orders() -> Scan:
    return Scan(schema=schema("id", "customer", "amount"), name="orders")


def customers() -> Scan:
    return Scan(schema=schema("name", "city"), name="customers")


def join_aggregate_plan(func: str = "sum") -> Plan:
    joined = Join(
        schema=schema("id", "customer", "amount", "name", "city"),
        relations=(orders(), customers()),
        condition=exp.EQ(this=ref("customer"), expression=ref("name")),
    )
    keyed = Project(
        schema=schema("__k0", "__a0"),
        input=joined,
        exprs=(("__k0", ref("city")), ("__a0", ref("amount"))),
    )
    aggregate = Aggregate(
        schema=schema("__k0", "__g0", "__g1", type_="HUGEINT"),
        input=keyed,
        keys=("__k0",),
        calls=(AggregateCall("__g0", func, ("__a0",)), AggregateCall("__g1", "count_star")),
    )
    having = Filter(
        schema=aggregate.schema,
        input=aggregate,
        predicate=exp.GT(this=ref("__g1"), expression=exp.Literal.number(1)),
    )
    return Project(
        schema=schema("city", "total", "n"),
        input=having,
        exprs=(("city", ref("__k0")), ("total", ref("__g0")), ("n", ref("__g1"))),
    )


def by_type(circuit: Circuit, kind: type) -> list:
    return [op for op in circuit.operators if isinstance(op, kind)]


def test_node_types_map_to_their_registered_operators():
    root = join_aggregate_plan()
    circuit = build(root, "by_city")
    assert circuit.view == "by_city"
    kinds = [type(op) for op in circuit.operators]
    assert kinds.count(Source) == 2
    assert kinds.count(DeltaJoin) == 1
    assert kinds.count(InvertibleAggregate) == 1
    assert kinds.count(ProjectOperator) == 2 and kinds.count(FilterOperator) == 1
    expected = {
        Scan: Source, Join: DeltaJoin, Filter: FilterOperator, Project: ProjectOperator,
        UnionAll: UnionAllOperator, Distinct: IncrementalDistinct,
    }
    for op in circuit.operators:
        if type(op.node) in expected:
            assert isinstance(op, expected[type(op.node)])
    assert set(REGISTRY) == {
        Scan, Filter, Project, UnionAll, Join, Aggregate, LocalAggregate, Distinct, SetOperation,
        Difference, Guard,
        Values, TopK, Arrange, Window, DistinctOn, Feedback, Imported, AsOfJoin,
        Differentiate, TemporalJoin, Integrate, Product, FlatMap,
    }
    assert circuit.output.node is root


def test_an_aggregate_with_a_non_invertible_call_is_recomputed_per_key():
    circuit = build(join_aggregate_plan("median"))
    (op,) = by_type(circuit, GroupRecompute)
    assert [t.role for t in op.traces()] == ["input", "output"]
    assert all(t.key == ("__k0",) for t in op.traces())
    assert op.input_keys() == (("__k0",),)
    assert not by_type(circuit, InvertibleAggregate)


def test_max_keeps_running_state_and_the_input_by_key():
    circuit = build(join_aggregate_plan("max"))
    (op,) = by_type(circuit, RunningAggregate)
    assert [t.role for t in op.traces()] == ["groups", "input"]
    assert all(t.key == ("__k0",) for t in op.traces())
    assert op.input_keys() == (("__k0",),)
    assert not by_type(circuit, GroupRecompute)


def test_operators_are_in_dependency_order():
    circuit = build(join_aggregate_plan())
    position = {op.fingerprint: i for i, op in enumerate(circuit.operators)}
    assert len(position) == len(circuit.operators)
    for i, op in enumerate(circuit.operators):
        assert all(position[child.fingerprint] < i for child in op.inputs)
        assert [c.node for c in op.inputs] == list(op.node.children())
    (join,) = by_type(circuit, DeltaJoin)
    assert [i.name for i in join.inputs] == ["orders", "customers"]
    assert sorted(circuit.sources()) == ["customers", "orders"]


def test_fingerprints_are_stable_and_name_what_is_computed():
    first, again = build(join_aggregate_plan()), build(join_aggregate_plan())
    assert [op.fingerprint for op in first.operators] == [op.fingerprint for op in again.operators]
    assert first.fingerprint == again.fingerprint
    other = build(join_aggregate_plan("max"))
    assert other.fingerprint != first.fingerprint
    # the sources below the aggregate did not change, so neither did their fingerprints
    assert {op.fingerprint for op in by_type(other, Source)} == {
        op.fingerprint for op in by_type(first, Source)
    }


def test_invertible_aggregate_keeps_typed_group_versions_by_key():
    circuit = build(join_aggregate_plan())
    (aggregate,) = by_type(circuit, InvertibleAggregate)
    (versions,) = aggregate.traces()
    assert versions.role == "versions" and versions.key == ("__k0",)
    names = versions.schema.names
    assert names[0] == "__k0" and "__cnt" in names and names[-2:] == ["__g0", "__g1"]
    assert versions.schema.type_of("__m0_s") == "HUGEINT"  # an exact integer sum
    assert aggregate.input_keys() == (("__k0",),)


def test_global_aggregate_runs_in_one_place():
    aggregate = Aggregate(
        schema=schema("__g0"), input=orders(), keys=(),
        calls=(AggregateCall("__g0", "count_star"),),
    )
    (op,) = by_type(build(aggregate), InvertibleAggregate)
    assert op.input_keys() == ((),)
    assert op.traces()[0].key == ()


def test_distinct_keeps_its_input_by_every_column():
    project = Project(schema=schema("customer", "amount"), input=orders(),
                      exprs=(("customer", ref("customer")), ("amount", ref("amount"))))
    circuit = build(Distinct(schema=project.schema, input=project))
    (op,) = by_type(circuit, IncrementalDistinct)
    (trace,) = op.traces()
    assert trace.key == ("customer", "amount")
    assert op.input_keys() == (("customer", "amount"),)
    assert circuit.output is op


def test_linear_operators_and_joins_keep_no_state():
    circuit = build(join_aggregate_plan())
    for op in circuit.operators:
        if isinstance(op, (Source, FilterOperator, ProjectOperator, DeltaJoin)):
            assert op.traces() == ()
    (join,) = by_type(circuit, DeltaJoin)
    assert join.reads_integrals() == (True, True)
    assert join.input_keys() == (("customer",), ("name",))


def test_a_shared_node_and_an_equal_subplan_are_one_operator():
    def positive(scan: Scan) -> Filter:
        return Filter(schema=scan.schema, input=scan,
                      predicate=exp.GT(this=ref("amount"), expression=exp.Literal.number(5)))

    shared = positive(orders())
    union = UnionAll(schema=shared.schema, parts=(shared, shared))
    circuit = build(union)
    assert len(circuit.operators) == 3  # source, filter, union
    assert circuit.output.inputs[0] is circuit.output.inputs[1]
    # two separately built but equal subplans: one operator, so one set of traces
    twice = UnionAll(schema=shared.schema, parts=(positive(orders()), positive(orders())))
    circuit = build(twice)
    assert len(circuit.operators) == 3
    assert circuit.output.inputs[0] is circuit.output.inputs[1]


def test_explain_lists_every_operator():
    circuit = build(join_aggregate_plan(), "by_city")
    text = circuit.explain()
    assert text.splitlines()[0].startswith("view by_city")
    for i in range(len(circuit.operators)):
        assert f"#{i} " in text
    assert "DeltaJoin" in text and "InvertibleAggregate" in text
    assert "Source orders" in text and "Source customers" in text
