"""A picture of the plan (issue #27, item 7): ``explain(view, format="dot" | "svg" | "png")``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import ivm

DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT);
    CREATE TABLE u (k BIGINT, name VARCHAR);
    CREATE VIEW j AS SELECT u.name, SUM(v) AS s FROM t JOIN u USING (k) GROUP BY u.name;
    CREATE VIEW j2 AS SELECT t.id, u.name FROM t JOIN u USING (k);
"""


def load(db: Any) -> None:
    db.ingest({"t": [{"id": 1, "k": 1, "v": 2}], "u": [{"k": 1, "name": "a"}]})
    db.ingest({"t": [{"id": 2, "k": 1, "v": 5}]})


@pytest.fixture
def db() -> Any:
    session = ivm.connect()
    session.execute(DDL)
    load(session)
    yield session
    session.close()


def test_dot_draws_every_operator_and_the_shared_arrangements(db: Any) -> None:
    dot = db.explain("j", format="dot")
    operators = db.explain("j").count("\n  ")  # one text line per operator shown
    assert dot.startswith('digraph "ivm j" {') and dot.rstrip().endswith("}")
    assert len(re.findall(r"^  op\d+ \[label=", dot, re.M)) == operators == 8
    assert len(re.findall(r"^  op\d+ -> op\d+;", dot, re.M)) == 7  # a tree: one edge less
    assert "op7 -> output;" in dot
    assert "arrangement of the rows of 't'" in dot and "read by j, j2" in dot  # shared
    assert "arr" in dot and "style=dotted" in dot


def test_analyze_puts_rows_and_time_on_the_operators(db: Any) -> None:
    dot = db.explain("j", analyze=True, format="dot")
    # over a join, stepped in memory: the join's change read once, by the partial sums
    assert re.search(r"InvertibleAggregate.*\[\d+\.\d+ ms, 1 statement, \d+ rows\]", dot)
    assert "(epoch 2: " in dot


def test_svg_and_png_need_graphviz(db: Any, monkeypatch: Any) -> None:
    if shutil.which("dot") is not None:
        assert db.explain("j", format="svg").lstrip().startswith(b"<?xml")
        assert db.explain("j", format="png").startswith(b"\x89PNG")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ivm.IvmError, match="needs Graphviz's dot"):
        db.explain("j", format="svg")
    with pytest.raises(ivm.IvmError, match="format must be one of"):
        db.explain("j", format="pdf")


def test_the_picture_shows_spark_stages(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        load(db)
        dot = db.explain("j", analyze=True, format="dot")
        assert dot.count("subgraph cluster_") >= 2 and "spark stage" in dot
        assert "spark stages" in db.explain("j")  # the text form is unchanged
        # The last epoch (t's row 2, v 5): the join's stage emitted that one row, joined;
        # the aggregate's stage (storing the view) the view's change: a's 2 → 7.
        text = db.explain("j", analyze=True)
        assert re.search(r"DeltaJoin .*\[spark stage: [\d.]+ ms in 2 tasks, 1 rows out\]", text)
        assert re.search(r"Aggregate .*\[spark stage: [\d.]+ ms in 2 tasks, 2 rows out\]", text)
        assert "1 rows out" in dot and db.last_profile.rows == {"t": 1, "j": 2, "j2": 1}
    finally:
        db.close()
