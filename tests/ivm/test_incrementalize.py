"""ivm.incrementalize: plan nodes become operators; stateful ones declare state_key.

Plans are built by hand, so these tests need neither SQL nor DuckDB.
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from ivm.circuit.circuit import (
    Circuit,
    DeltaJoin,
    IncrementalAggregate,
    IncrementalDistinct,
    Linear,
    Source,
)
from ivm.circuit.incrementalize import incrementalize
from ivm.plan.nodes import Aggregate, AggregateCall, Distinct, Filter, Join, Project, Scan, UnionAll
from ivm.schema import Column, Schema


def schema(*names: str, type_: str = "BIGINT") -> Schema:
    return Schema(tuple(Column(n, type_) for n in names))


def ref(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


ORDERS = Scan(schema=schema("id", "customer", "amount"), name="orders")
CUSTOMERS = Scan(schema=schema("name", "city"), name="customers")


def join_aggregate_plan():
    joined = Join(
        schema=schema("id", "customer", "amount", "name", "city"),
        relations=(ORDERS, CUSTOMERS),
        condition=exp.EQ(this=ref("customer"), expression=ref("name")),
    )
    keyed = Project(
        schema=schema("__k0", "__a0"),
        input=joined,
        exprs=(("__k0", ref("city")), ("__a0", ref("amount"))),
    )
    aggregate = Aggregate(
        schema=schema("__k0", "__g0", "__g1"),
        input=keyed,
        keys=("__k0",),
        calls=(AggregateCall("__g0", "sum", "__a0"), AggregateCall("__g1", "count_star", None)),
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


def test_node_types_map_to_operator_types():
    root = join_aggregate_plan()
    circuit = incrementalize(root, "by_city")
    assert circuit.view == "by_city"
    kinds = [type(op) for op in circuit.operators]
    assert kinds.count(Source) == 2
    assert kinds.count(DeltaJoin) == 1
    assert kinds.count(IncrementalAggregate) == 1
    assert kinds.count(Linear) == 3  # project, filter, project
    assert kinds.count(IncrementalDistinct) == 0
    for op in circuit.operators:
        expected = {
            Scan: Source, Join: DeltaJoin, Aggregate: IncrementalAggregate,
            Filter: Linear, Project: Linear, UnionAll: Linear, Distinct: IncrementalDistinct,
        }[type(op.node)]
        assert isinstance(op, expected)
    assert circuit.output.node is root
    assert isinstance(circuit.output, Linear)


def test_operators_are_in_dependency_order_with_their_index():
    circuit = incrementalize(join_aggregate_plan(), "v")
    position = {id(op): i for i, op in enumerate(circuit.operators)}
    for i, op in enumerate(circuit.operators):
        assert op.index == i
        assert all(position[id(child)] < i for child in op.inputs)
        assert len(op.inputs) == len(op.node.inputs)
        assert [c.node for c in op.inputs] == list(op.node.inputs)
    (join,) = by_type(circuit, DeltaJoin)
    assert [type(i) for i in join.inputs] == [Source, Source]
    assert [i.name for i in join.inputs] == ["orders", "customers"]


def test_sources_names_every_scan():
    circuit = incrementalize(join_aggregate_plan(), "v")
    assert sorted(circuit.sources()) == ["customers", "orders"]
    assert sorted(op.name for op in by_type(circuit, Source)) == ["customers", "orders"]


def test_aggregate_state_key_is_its_group_keys():
    circuit = incrementalize(join_aggregate_plan(), "v")
    (aggregate,) = by_type(circuit, IncrementalAggregate)
    assert aggregate.stateful
    assert aggregate.state_key == ("__k0",)
    assert aggregate.shape.keys == ("__k0",)
    assert [c.func for c in aggregate.shape.calls] == ["sum", "count_star"]


def test_global_aggregate_state_key_is_empty():
    aggregate = Aggregate(
        schema=schema("__g0"), input=ORDERS, keys=(),
        calls=(AggregateCall("__g0", "count_star", None),),
    )
    (op,) = by_type(incrementalize(aggregate, "g"), IncrementalAggregate)
    assert op.stateful
    assert op.state_key == ()


def test_multi_key_aggregate_state_key_keeps_key_order():
    aggregate = Aggregate(
        schema=schema("customer", "id", "__g0"), input=ORDERS, keys=("customer", "id"),
        calls=(AggregateCall("__g0", "max", "amount"),),
    )
    (op,) = by_type(incrementalize(aggregate, "g"), IncrementalAggregate)
    assert op.state_key == ("customer", "id")


def test_distinct_state_key_is_every_column():
    project = Project(schema=schema("customer", "amount"), input=ORDERS,
                      exprs=(("customer", ref("customer")), ("amount", ref("amount"))))
    distinct = Distinct(schema=project.schema, input=project)
    circuit = incrementalize(distinct, "d")
    (op,) = by_type(circuit, IncrementalDistinct)
    assert op.stateful
    assert op.state_key == ("customer", "amount")
    assert circuit.output is op


@pytest.mark.parametrize("kind", [Source, Linear, DeltaJoin])
def test_stateless_operators_declare_no_state_key(kind):
    root = join_aggregate_plan()
    for op in by_type(incrementalize(root, "v"), kind):
        assert not op.stateful
        assert op.state_key is None


def test_union_all_is_linear_and_shared_node_is_one_operator():
    shared = Filter(schema=ORDERS.schema, input=ORDERS,
                    predicate=exp.GT(this=ref("amount"), expression=exp.Literal.number(5)))
    union = UnionAll(schema=ORDERS.schema, parts=(shared, shared))
    circuit = incrementalize(union, "u")
    assert isinstance(circuit.output, Linear)
    assert len(by_type(circuit, Source)) == 1
    assert len(circuit.operators) == 3  # source, filter, union
    assert circuit.output.inputs[0] is circuit.output.inputs[1]


def test_explain_lists_every_operator():
    circuit = incrementalize(join_aggregate_plan(), "by_city")
    text = circuit.explain()
    assert text.splitlines()[0].startswith("view by_city")
    for op in circuit.operators:
        assert f"#{op.index} " in text
    assert "DeltaJoin" in text and "IncrementalAggregate" in text
    assert "Source orders" in text and "Source customers" in text
