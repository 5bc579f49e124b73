"""sql_frontend.rules: the optimizer rules run in order, each given only the keyword
arguments it names, and the planner resolves names only through them."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from ivm.sql_frontend import rules
from ivm.sql_frontend.exists_select import exists_select_one
from ivm.sql_frontend.rules import RULES, apply_rules
from ivm.sql_frontend.subquery_outputs import name_subquery_outputs


def test_qualify_is_the_first_rule_that_resolves_names():
    # only the naming of unnamed subquery items (which qualify expects) and the EXISTS
    # lists that cannot matter (so that qualify expands no * there) come first
    assert RULES[:3] == (name_subquery_outputs, exists_select_one, qualify)


def test_each_rule_gets_only_the_arguments_it_names():
    seen: list[tuple[str, dict]] = []

    def first(expression, schema, dialect):
        seen.append(("first", {"schema": schema, "dialect": dialect}))
        return exp.select("1")

    def second(expression, quote_identifiers=True):
        seen.append(("second", {"quote_identifiers": quote_identifiers, "sql": expression.sql()}))
        return expression

    tree = sqlglot.parse_one("SELECT a FROM t", read="duckdb")
    result = apply_rules(
        tree, (first, second), schema={"t": {"a": "INT"}}, dialect="duckdb",
        quote_identifiers=False, unused=1,
    )
    assert result.sql() == "SELECT 1"
    assert [name for name, _ in seen] == ["first", "second"]
    assert isinstance(seen[0][1]["schema"], MappingSchema)  # made a sqlglot schema once
    assert seen[0][1]["dialect"] == "duckdb"
    assert seen[1][1] == {"quote_identifiers": False, "sql": "SELECT 1"}
    assert tree.sql() == "SELECT a FROM t"  # the input is not changed


def test_the_planner_resolves_through_the_rules_tuple(monkeypatch, plan):
    calls: list[str] = []

    def spy(expression, validate_qualify_columns):
        assert validate_qualify_columns is True
        calls.append(expression.sql(dialect="duckdb"))
        return expression

    monkeypatch.setattr(rules, "RULES", (*RULES, spy))
    root = plan("SELECT * FROM orders")
    assert root.schema.names == ["id", "customer", "amount"]
    # the spy ran after qualify: the star is expanded, names resolved
    assert calls == [
        "SELECT orders.id AS id, orders.customer AS customer, orders.amount AS amount "
        "FROM orders AS orders"
    ]
