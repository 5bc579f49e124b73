"""``db.check(sql)`` (issue #27, item 8): maintained or refused (construct and position),
the state a maintained view would keep, and nothing created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ivm

DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT);
    CREATE TABLE u (k BIGINT, name VARCHAR);
"""


@pytest.fixture
def db() -> Any:
    session = ivm.connect()
    session.execute(DDL)
    yield session
    session.close()


def test_a_maintained_view_and_the_state_it_keeps(db: Any) -> None:
    check = db.check("SELECT u.name, SUM(v) AS s FROM t JOIN u USING (k) GROUP BY u.name")
    assert check and check.maintained and check.error is None
    assert check.columns == ("name", "s")
    kept = [(s.role, s.key) for s in check.state]
    assert kept[0] == ("the view's rows", ())
    assert ("versions", ("__k0",)) in kept  # the aggregate's groups, by group key
    assert "DeltaJoin" in check.plan and "state it keeps:" in str(check)
    assert db.views == {} and db.epoch == 0  # nothing created


def test_a_refused_view_names_the_construct_and_where(db: Any) -> None:
    check = db.check("CREATE VIEW x AS\n  SELECT id, random() AS r FROM t")
    assert not check
    assert isinstance(check.error, ivm.UnsupportedSQL)
    assert "at line 2, column 14: random()" in str(check.error)
    assert str(check).startswith("refused: non-deterministic function")
    with pytest.raises(ivm.UnsupportedSQL, match="random"):  # exactly what CREATE VIEW says
        db.execute("CREATE VIEW x AS\n  SELECT id, random() AS r FROM t")
    missing = db.check("SELECT nope FROM t")
    assert isinstance(missing.error, ivm.SqlError) and "nope" in str(missing)
    with pytest.raises(ivm.SqlError, match="one query or one CREATE VIEW"):
        db.check("CREATE TABLE z (a INT)")


def test_check_on_spark(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        assert db.check("SELECT k, COUNT(*) AS n FROM t GROUP BY k").columns == ("k", "n")
        assert not db.check("SELECT id, random() AS r FROM t")
        assert db.views == {}
    finally:
        db.close()
