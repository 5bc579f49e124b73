"""sql_frontend.positions: every error points at the first character of its construct, as a
line and column of the whole script the user passed (``parse_script`` records where each
view's query starts; ``plan_query(..., origin=...)`` reports in those coordinates)."""

from __future__ import annotations

import pytest

from ivm.errors import IvmError, SqlError, UnsupportedSQL
from ivm.sql_frontend.planner import plan_query
from ivm.sql_frontend.positions import Origin
from ivm.sql_frontend.statements import CreateView, parse_script


def script_error(script: str, tables, describe) -> IvmError:
    """The error of running ``script``'s statements through the front end, as the session
    does: parse the script, plan each view's query at its origin."""
    try:
        for statement in parse_script(script):
            if isinstance(statement, CreateView):
                plan_query(statement.sql, tables, describe, origin=statement.origin)
    except IvmError as error:
        return error
    raise AssertionError(f"no error for {script!r}")


def test_origin_advances_over_lines_and_columns():
    origin = Origin(offset=10, line=3, column=5)
    assert origin.advance("abc", 2) == Origin(12, 3, 7)
    assert origin.advance("ab\ncd\nef", 7) == Origin(17, 5, 2)
    assert origin.advance("ab\n", 3) == Origin(13, 4, 1)
    assert str(Origin(0, 2, 9)) == "line 2, column 9"


def test_limit_is_reported_at_its_keyword_in_script_coordinates(tables, describe):
    script = "CREATE VIEW v AS SELECT * FROM orders LIMIT 3"
    error = script_error(script, tables, describe)
    assert isinstance(error, UnsupportedSQL)
    assert "ORDER BY (at line 1, column 39" in str(error)
    assert script[38:].startswith("LIMIT")


def test_construct_on_line_three_of_a_script(tables, describe, pointed_at):
    script = (
        "CREATE TABLE t (a INTEGER);\n"
        "CREATE VIEW v AS SELECT id,\n"
        "  MODE(amount) OVER (ORDER BY amount) AS r FROM orders"
    )
    error = script_error(script, tables, describe)
    assert "line 3, column 3" in str(error)
    assert pointed_at(str(error), script).startswith("MODE(amount)")


def test_second_view_of_a_script_is_located_in_the_script(tables, describe, pointed_at):
    script = (
        "CREATE VIEW ok AS SELECT id FROM orders;\n"
        "\n"
        "  CREATE VIEW bad AS\n"
        "    SELECT customer FROM orders\n"
        "    ORDER BY row_number() OVER (PARTITION BY customer ORDER BY id);"
    )
    error = script_error(script, tables, describe)
    assert "line 5, column 14" in str(error)
    assert pointed_at(str(error), script).startswith("row_number() OVER")


@pytest.mark.parametrize(
    ("query", "at"),
    [
        ("SELECT * FROM orders LIMIT 3", "LIMIT 3"),
        ("SELECT * FROM orders\n  OFFSET 2", "OFFSET 2"),
        ("SELECT c.name FROM customers c RIGHT JOIN customers d ON true\n NATURAL JOIN customers e",
         "NATURAL JOIN"),
        ("SELECT c.name FROM customers c FULL OUTER JOIN customers d ON true "
         "JOIN customers e USING (name)", "JOIN customers e USING"),
        ("SELECT o.id FROM orders o\n ASOF RIGHT JOIN customers c ON o.customer >= c.name",
         "ASOF RIGHT JOIN"),
        ("SELECT o.id FROM orders o ASOF JOIN customers c ON o.customer >= c.name\n"
         "  AND o.id < c.name", "ASOF JOIN"),
        ("SELECT id FROM orders ORDER BY rank() OVER (ORDER BY amount)", "rank()"),
        ("SELECT id, MODE(amount) OVER () AS r FROM orders", "MODE(amount)"),
        ("SELECT id, STRING_AGG(customer, ',') OVER () AS r FROM orders", "STRING_AGG("),
        ("SELECT id, SUM(id) OVER (ORDER BY amount\n ROWS 1 PRECEDING EXCLUDE TIES) FROM orders",
         "SUM(id) OVER"),
        ("SELECT id, first_value(id ORDER BY amount) OVER () FROM orders", "first_value("),
        ("SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM orders p WHERE p.id = o.id "
         "QUALIFY rank() OVER (ORDER BY id) = 1)", "rank()"),
        ("SELECT id, (SELECT MAX(amount) FROM orders p WHERE p.id = o.id GROUP BY p.id) AS s "
         "FROM orders o", "SELECT MAX"),
        ("SELECT id, (customer, id) IN (SELECT name, 1 FROM customers) AS m FROM orders",
         "customer, id"),
        ("SELECT t.x FROM (VALUES (o.id + 1)) t(x), orders o", "o.id + 1"),
        ("SELECT a FROM (VALUES ((SELECT MAX(id) FROM orders))) t(a)", "(SELECT MAX"),
        ("WITH RECURSIVE r(x) USING KEY (x) AS (SELECT id FROM orders UNION "
         "SELECT x FROM r) SELECT x FROM r", "r(x) USING KEY"),
        ("SELECT * FROM read_csv('x.csv')", "read_csv"),
        ("SELECT id, current_date AS d FROM orders", "current_date"),
        ("SELECT id, random() AS d FROM orders", "random()"),
        ("SELECT id FROM orders FOR SYSTEM_TIME AS OF now()", "FOR SYSTEM_TIME"),
        ("PIVOT orders ON customer USING sum(amount)", "customer USING"),
        ("SELECT * FROM orders o, generate_series(1, o.id) g, read_csv('x')", "read_csv"),
    ],
)
def test_unsupported_constructs_point_at_their_first_character(
    tables, describe, pointed_at, query, at
):
    script = f"CREATE TABLE t (a INTEGER);\nCREATE VIEW v AS\n   {query};"
    error = script_error(script, tables, describe)
    assert isinstance(error, UnsupportedSQL), error
    assert pointed_at(str(error), script).startswith(at), str(error)


@pytest.mark.parametrize(
    ("query", "at"),
    [
        ("SELECT * FROM nope", "nope"),
        ("SELECT nope FROM orders", "nope"),
        ("SELECT o.nope FROM orders o", "o.nope"),
        ("SELECT customer, amount FROM orders GROUP BY customer", "amount"),
        ("SELECT id FROM orders UNION SELECT id, id FROM orders", "UNION"),
        ("SELECT id AS __w FROM orders", "__w"),
        ("SELECT (1 FROM orders", "FROM"),
        ("SELEC * FROM orders", "SELEC"),
    ],
)
def test_sql_errors_point_at_their_cause(tables, describe, pointed_at, query, at):
    script = f"CREATE TABLE t (a INTEGER);\n\nCREATE VIEW v AS {query}"
    error = script_error(script, tables, describe)
    assert isinstance(error, SqlError), error
    assert pointed_at(str(error), script).startswith(at), str(error)


def test_a_stored_view_replanned_alone_reports_positions_in_its_own_text(tables, describe):
    with pytest.raises(UnsupportedSQL, match=r"ORDER BY \(at line 3, column 3"):
        plan_query("SELECT *\n  FROM orders\n  LIMIT 3", tables, describe)
    with pytest.raises(UnsupportedSQL, match=r"ORDER BY \(at line 1, column 22"):
        plan_query("SELECT * FROM orders LIMIT 3", tables, describe)


def test_positions_count_from_the_origin_given(tables, describe):
    origin = Origin(offset=100, line=7, column=12)
    with pytest.raises(UnsupportedSQL, match=r"ORDER BY \(at line 7, column 33"):
        plan_query("SELECT * FROM orders LIMIT 3", tables, describe, origin=origin)
    with pytest.raises(UnsupportedSQL, match=r"ORDER BY \(at line 8, column 1"):
        plan_query("SELECT * FROM orders\nLIMIT 3", tables, describe, origin=origin)


@pytest.mark.parametrize(
    ("query", "excerpt"),
    [
        ("SELECT customer, string_agg(customer, ',') AS l FROM orders GROUP BY customer",
         "string_agg(customer, ',')"),
        ("SELECT id, random() AS r FROM orders", "random()"),
        ("SELECT id FROM orders ORDER BY SUM(amount)\n   OVER ()", "SUM(amount) OVER ()"),
        ("SELECT o.id FROM orders o\n  ASOF RIGHT JOIN customers c ON o.customer >= c.name",
         "ASOF RIGHT JOIN customers c ON o.customer >= c.name"),
    ],
)
def test_messages_quote_the_users_own_text(tables, describe, query, excerpt):
    with pytest.raises(UnsupportedSQL) as info:
        plan_query(query, tables, describe)
    assert f": {excerpt})" in str(info.value)
