"""The equi-join hypergraph: which joins are cyclic, and the plan of each delta rule."""

from __future__ import annotations

import pytest
from sqlglot import exp

from ivm.operators.join_hypergraph import JoinShape


def _shape(*edges: str) -> JoinShape:
    """Inputs named by their columns' attribute letters: ``"ab"`` holds a and b; the
    condition equates equal letters of different inputs."""
    schemas = [[f"{letter}{i}" for letter in edge] for i, edge in enumerate(edges)]
    equal = []
    for i, edge in enumerate(edges):
        for j in range(i + 1, len(edges)):
            for letter in set(edge) & set(edges[j]):
                equal.append(exp.EQ(this=exp.column(f"{letter}{i}"),
                                    expression=exp.column(f"{letter}{j}")))
    shape = JoinShape.of(schemas, equal)
    assert shape is not None
    return shape


@pytest.mark.parametrize(("edges", "cyclic"), [
    (("ab", "bc", "ca"), True),  # triangle
    (("ab", "bc", "cd", "da"), True),  # 4-cycle
    (("ab", "ac", "ad", "bc", "bd", "cd"), True),  # 4-clique
    (("ab", "bc", "cd"), False),  # path
    (("ab", "ac", "ad"), False),  # star
    (("abc", "ab", "bc", "ca"), False),  # a triangle covered by one input
    (("ab", "ab"), False),
])
def test_cyclic(edges: tuple[str, ...], cyclic: bool) -> None:
    assert _shape(*edges).cyclic() is cyclic


def test_a_rule_binds_its_own_attributes_then_links_the_rest() -> None:
    shape = _shape("ab", "bc", "cd", "da")
    rule = shape.rule(0, shape.global_order())
    assert [shape.attributes[a][0][1][0] for a in rule.order[:2]] == ["a", "b"]
    for step in rule.steps:
        assert step.participants and all(prefix for _, prefix in step.participants)


def test_an_equality_inside_one_input_is_not_a_hypergraph() -> None:
    equal = [exp.EQ(this=exp.column("a0"), expression=exp.column("a1")),
             exp.EQ(this=exp.column("a1"), expression=exp.column("b0"))]
    assert JoinShape.of([["a0", "b0"], ["a1"]], equal) is None


def test_the_core_is_what_the_reduction_leaves() -> None:
    assert _shape("ab", "bc", "ca", "cd").core() == {0, 1, 2}  # the pendant "cd" goes
    assert _shape("ab", "bc", "cd").core() == set()
