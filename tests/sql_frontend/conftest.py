"""Shared fixtures of the front-end tests: a plain DuckDB connection holding the tables the
queries read, and the ``describe`` callback the planner types plan nodes with (DuckDB's
``DESCRIBE``, as the session does). Nothing here goes through ``ivm.connect()``.

Helpers are fixtures (``describer``, ``pointed_at``): the name ``conftest`` is taken on
``sys.path`` by tests/conftest.py, so this module cannot be imported by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import duckdb
import pytest

from ivm.errors import SqlError
from ivm.plan.node import Plan
from ivm.schema import Column, Schema
from ivm.sql_frontend.planner import plan_query
from ivm.sql_frontend.positions import TEXT_START, Origin

TABLE_DDL = {
    "orders": "id BIGINT, customer VARCHAR, amount BIGINT",
    "customers": "name VARCHAR, city VARCHAR",
    "m": "k INTEGER, x INTEGER, y DOUBLE, d DECIMAL(10,2), s VARCHAR, b BOOLEAN, c BOOLEAN",
}
"""The tables every front-end test may read."""

ROWS = """
    INSERT INTO orders VALUES (1, 'ann', 10), (2, 'ann', 5), (3, 'bob', 7), (4, 'zed', 1);
    INSERT INTO customers VALUES ('ann', 'oslo'), ('bob', 'oslo'), ('cy', 'rome');
    INSERT INTO m VALUES (1, 1, 1.5, 1.25, 'a', true, true), (1, 2, NULL, 2.5, 'b', false, NULL),
        (1, NULL, 3.0, NULL, NULL, NULL, false), (2, 5, 2.0, 3.0, 'z', true, true),
        (2, 5, 2.0, 3.0, 'z', true, true), (3, NULL, NULL, NULL, NULL, NULL, NULL);
"""

Describe = Callable[[str], Schema]


def make_describer(connection: duckdb.DuckDBPyConnection) -> Describe:
    """The planner's typing callback over ``connection``: DESCRIBE, errors as SqlError."""

    def run(sql: str) -> Schema:
        try:
            rows = connection.execute(f"DESCRIBE {sql}").fetchall()
        except duckdb.Error as error:
            raise SqlError(str(error)) from error
        return Schema(tuple(Column(r[0], r[1]) for r in rows))

    return run


def relations(connection: duckdb.DuckDBPyConnection) -> dict[str, Schema]:
    """The schema of every table of TABLE_DDL, as DuckDB describes it."""
    describe = make_describer(connection)
    return {name: describe(f'SELECT * FROM "{name}"') for name in TABLE_DDL}


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    for name, columns in TABLE_DDL.items():
        connection.execute(f'CREATE TABLE "{name}" ({columns})')
    connection.execute(ROWS)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def describe(con) -> Describe:
    return make_describer(con)


@pytest.fixture(scope="module")
def tables(con) -> dict[str, Schema]:
    return relations(con)


@pytest.fixture(scope="session")
def describer() -> Callable[[duckdb.DuckDBPyConnection], Describe]:
    """Makes the typing callback for another connection."""
    return make_describer


@pytest.fixture(scope="module")
def plan(con) -> Callable[..., Plan]:
    """Plan a query over the fixture tables (optionally at an ``origin`` in a script)."""
    tables = relations(con)
    describe = make_describer(con)

    def run(sql: str, origin: Origin = TEXT_START) -> Plan:
        return plan_query(sql, tables, describe, origin=origin)

    return run


POSITION = re.compile(r"line (\d+), column (\d+)")


def text_from_position(message: str, script: str) -> str:
    """The text of ``script`` from the position an error message gives."""
    found = POSITION.search(message)
    assert found, f"no position in: {message}"
    line, column = int(found[1]), int(found[2])
    return script.split("\n")[line - 1][column - 1 :]


@pytest.fixture(scope="session")
def pointed_at() -> Callable[[str, str], str]:
    """``pointed_at(message, script)``: the script's text from the error's position."""
    return text_from_position
