"""ALTER TABLE … ADD / DROP / RENAME COLUMN (issue #27, item 11): the table keeps its rows,
the views reading it are planned again, and one using a dropped column is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ivm

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
    CREATE VIEW everything AS SELECT * FROM orders;
    CREATE VIEW big AS SELECT customer FROM revenue WHERE total > 5;
"""


def rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def exact(db: Any) -> None:
    for name, view in db.views.items():
        assert rows(db.read(name)) == rows(db.sql(view.sql)), name


@pytest.fixture
def db(tmp_path: Path) -> Any:
    session = ivm.connect(tmp_path / "s")
    session.execute(DDL)
    session.ingest("orders", [{"id": 1, "customer": "a", "amount": 5},
                              {"id": 2, "customer": "b", "amount": 7}])
    yield session
    session.close()


def test_add_column_keeps_the_rows_and_replans_the_views(db: Any, tmp_path: Path) -> None:
    db.execute("ALTER TABLE orders ADD COLUMN region VARCHAR")
    assert db.tables["orders"].arrow_schema.names == ["id", "customer", "amount", "region"]
    assert rows(db.read("everything")) == [(1, "a", 5, None), (2, "b", 7, None)]
    db.ingest("orders", [{"id": 3, "customer": "a", "amount": 2, "region": "eu"}])
    db.execute("CREATE VIEW by_region AS SELECT region, COUNT(*) AS n FROM orders GROUP BY ALL")
    exact(db)
    db.close()
    db = ivm.connect(tmp_path / "s")  # the new column is kept with the state
    assert rows(db.read("by_region")) == [("eu", 1), (None, 2)]
    exact(db)
    db.close()


def test_drop_column_used_by_a_view_is_refused_naming_it(db: Any) -> None:
    with pytest.raises(ivm.IvmError, match="view 'revenue' reads 'orders' and no longer plans"):
        db.execute("ALTER TABLE orders DROP COLUMN amount")
    assert db.tables["orders"].arrow_schema.names == ["id", "customer", "amount"]
    db.execute("DROP VIEW big; DROP VIEW revenue; ALTER TABLE orders DROP amount")
    assert rows(db.read("everything")) == [(1, "a"), (2, "b")]
    db.ingest("orders", [{"id": 3, "customer": "c"}])
    exact(db)


def test_rename_column(db: Any) -> None:
    db.execute("""
        DROP VIEW big; DROP VIEW revenue;
        ALTER TABLE orders RENAME COLUMN id TO order_id;
        ALTER TABLE orders RENAME COLUMN customer TO who;
    """)
    assert db.tables["orders"].primary_key == ("order_id",)
    assert rows(db.read("everything")) == [(1, "a", 5), (2, "b", 7)]
    db.ingest("orders", [{"order_id": 1, "who": "z", "amount": 1}], mode="upsert")
    assert rows(db.read("everything")) == [(1, "z", 1), (2, "b", 7)]
    exact(db)


def test_what_alter_table_refuses(db: Any) -> None:
    with pytest.raises(ivm.SqlError, match="primary key"):
        db.execute("ALTER TABLE orders DROP COLUMN id")
    with pytest.raises(ivm.SqlError, match="already has a column 'customer'"):
        db.execute("ALTER TABLE orders ADD COLUMN CUSTOMER INT")
    with pytest.raises(ivm.SqlError, match="no column 'nope'"):
        db.execute("ALTER TABLE orders RENAME COLUMN nope TO x")
    with pytest.raises(ivm.SqlError, match="no table named 'revenue'"):
        db.execute("ALTER TABLE revenue ADD COLUMN x INT")
    with pytest.raises(ivm.UnsupportedSQL, match="add the column plainly"):
        db.execute("ALTER TABLE orders ADD COLUMN x INT NOT NULL")
    with pytest.raises(ivm.UnsupportedSQL, match="RENAME COLUMN a TO b"):
        db.execute("ALTER TABLE orders RENAME TO sales")
    assert db.epoch == 1 and rows(db.read("revenue")) == [("a", 5), ("b", 7)]


def test_alter_table_in_spark_mode(spark: Any, tmp_path: Path) -> None:
    # The table's rows move to a new generation of its partition files, mapped to the new
    # columns; the views reading it are planned and filled again; the epoch stays.
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        db.ingest("orders", [{"id": i, "customer": "abc"[i % 3], "amount": i} for i in range(9)])
        with pytest.raises(ivm.IvmError, match="view 'revenue' reads 'orders' and no longer"):
            db.execute("ALTER TABLE orders DROP COLUMN amount")
        assert db.tables["orders"].arrow_schema.names == ["id", "customer", "amount"]
        assert rows(db.read("orders")) == [(i, "abc"[i % 3], i) for i in range(9)]
        assert len(list((tmp_path / "s" / "tables").iterdir())) == 1  # the refill's files gone
        db.execute("ALTER TABLE orders ADD COLUMN region VARCHAR")
        assert db.epoch == 1
        assert db.tables["orders"].arrow_schema.names == ["id", "customer", "amount", "region"]
        assert rows(db.read("everything")) == [(i, "abc"[i % 3], i, None) for i in range(9)]
        db.ingest("orders", pa.table({"id": [1, 1, 20], "customer": ["b", "z", "a"],
                                      "amount": [1, 4, 2], "region": [None, "eu", "us"],
                                      "__w": [-1, 1, 1]}))
        db.execute("""
            DROP VIEW big; DROP VIEW revenue;
            ALTER TABLE orders RENAME COLUMN customer TO who;
            ALTER TABLE orders DROP COLUMN amount;
            CREATE VIEW by_who AS SELECT who, region, COUNT(*) AS n FROM orders GROUP BY ALL;
        """)
        assert db.tables["orders"].primary_key == ("id",)
        assert rows(db.read("by_who")) == sorted(
            [("a", None, 3), ("a", "us", 1), ("b", None, 2), ("c", None, 3), ("z", "eu", 1)],
            key=repr)
        db.ingest("orders", [{"id": 3, "who": "q", "region": "eu"}], mode="upsert")
        exact(db)
        assert rows(db.dataframe("orders").toArrow()) == rows(db.read("orders"))
    finally:
        db.close()
    with ivm.connect(tmp_path / "s", spark=spark, partitions=2) as db:  # kept with the state
        assert db.tables["orders"].arrow_schema.names == ["id", "who", "region"]
        assert ("q", "eu", 1) in rows(db.read("by_who"))  # the upsert of id 3
        exact(db)
