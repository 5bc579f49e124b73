"""db.explain(view): the incremental circuit, checked golden-style on its operator lines.

The checks look at which operators appear, in which nesting, over which sources, and
ignore spacing and the wording of annotations so small formatting changes do not break
them.
"""

from __future__ import annotations

import re

import pytest

import ivm


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute("""
        CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
        CREATE TABLE customers (name VARCHAR PRIMARY KEY, city VARCHAR);
        CREATE VIEW by_city AS
            SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n
            FROM orders o JOIN customers c ON o.customer = c.name
            GROUP BY c.city;
        CREATE VIEW big AS SELECT id FROM orders WHERE amount > 100;
        CREATE VIEW cities AS SELECT DISTINCT city FROM customers;
        CREATE VIEW n_cities AS SELECT COUNT(*) AS n FROM cities;
    """)
    yield session
    session.close()


OPERATOR = re.compile(r"^(?P<indent>\s*)#?\d*\s*(?P<op>[A-Z][A-Za-z]+)\b(?P<rest>.*)$")
KNOWN = {"Source", "Filter", "Project", "UnionAll", "DeltaJoin", "InvertibleAggregate",
         "GroupRecompute", "IncrementalDistinct"}


def operators(text: str) -> list[tuple[int, str, str]]:
    """(depth, operator name, rest of line) for each operator line of an explain text."""
    found = []
    for line in text.splitlines():
        match = OPERATOR.match(line)
        if match and match["op"] in KNOWN:
            found.append((len(match["indent"]), match["op"], match["rest"]))
    return found


def names(text: str) -> list[str]:
    return [op for _, op, _ in operators(text)]


def test_join_aggregate_circuit(db):
    text = db.explain("by_city")
    assert isinstance(text, str)
    assert "by_city" in text.splitlines()[0]
    ops = operators(text)
    kinds = names(text)
    assert kinds.count("DeltaJoin") == 1
    assert kinds.count("InvertibleAggregate") == 1
    assert kinds.count("Source") == 2
    assert "IncrementalDistinct" not in kinds
    sources = sorted(re.match(r"\s*(\w+)", rest)[1] for _, op, rest in ops if op == "Source")
    assert sources == ["customers", "orders"]
    depth = {op: d for d, op, _ in reversed(ops)}  # first occurrence wins
    # output at the top: aggregate above the join, join above the sources
    assert depth["InvertibleAggregate"] < depth["DeltaJoin"] < depth["Source"]
    assert kinds.index("InvertibleAggregate") < kinds.index("DeltaJoin") < kinds.index("Source")
    aggregate = next(rest for _, op, rest in ops if op == "InvertibleAggregate")
    assert re.search(r"sum", aggregate, re.IGNORECASE)
    assert re.search(r"count", aggregate, re.IGNORECASE)
    join = next(rest for _, op, rest in ops if op == "DeltaJoin")
    assert "2" in join  # two inputs
    assert "customer" in join and "name" in join  # the join condition


def test_filter_circuit_is_stateless(db):
    text = db.explain("big")
    kinds = names(text)
    assert "Filter" in kinds
    assert kinds[-1] == "Source"
    stateful = {"DeltaJoin", "InvertibleAggregate", "GroupRecompute", "IncrementalDistinct"}
    assert not stateful & set(kinds)
    assert "100" in next(rest for _, op, rest in operators(text) if op == "Filter")
    assert re.search(r"Source\s+orders\b", text)


def test_distinct_circuit(db):
    kinds = names(db.explain("cities"))
    assert "IncrementalDistinct" in kinds
    assert kinds.index("IncrementalDistinct") < kinds.index("Source")
    assert re.search(r"Source\s+customers\b", db.explain("cities"))


def test_view_over_view_reads_the_view_as_source(db):
    text = db.explain("n_cities")
    assert re.search(r"Source\s+cities\b", text)
    assert not re.search(r"Source\s+customers\b", text)
    kinds = names(text)
    assert "InvertibleAggregate" in kinds
    assert "IncrementalDistinct" not in kinds


def test_global_aggregate_is_marked(db):
    db.execute("CREATE VIEW total AS SELECT SUM(amount) AS s FROM orders")
    aggregate = next(rest for _, op, rest in operators(db.explain("total"))
                     if op == "InvertibleAggregate")
    assert "global" in aggregate.lower()


def test_explain_is_stable_and_does_not_change_state(db):
    first = db.explain("by_city")
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": 1}])
    assert db.explain("by_city") == first
    assert db.epoch == 1


def test_explain_of_table_or_unknown_raises(db):
    with pytest.raises(ivm.SqlError):
        db.explain("orders")
    with pytest.raises(ivm.SqlError):
        db.explain("nope")


def test_explain_analyze_profiles_the_last_epoch(db):
    assert "no epoch has run" in db.explain("by_city", analyze=True)
    db.ingest("customers", [{"name": "a", "city": "x"}])
    db.ingest("orders", [{"id": i, "customer": "a", "amount": i} for i in range(1, 50)])
    text = db.explain("by_city", analyze=True)
    first, second = text.splitlines()[:2]
    assert first.startswith("last epoch 2:")
    for phase in ("batches", "checks", "views", "state appends", "commit"):
        assert phase in first
    assert re.search(r"this view: [\d.]+ ms computing its change \(strategy: incremental\)", second)
    stateful = next(line for line in text.splitlines() if "Aggregate" in line)
    assert re.search(r"\[[\d.]+ ms, \d+ statements?, [\d,]+ rows\]", stateful)
    assert "fused into its consumer's statement" in text  # the join's delta rules, projections
    assert "statement" not in db.explain("by_city")  # without analyze: the circuit only
    assert "not changed by the last epoch" in db.explain("cities", analyze=True)
    assert "[no change]" in db.explain("cities", analyze=True)
