"""sql_frontend.parsing: parse errors are plain text with a script position, and sqlglot's
warnings never reach stderr or the user's logs while ivm parses; outside ivm's calls the
logging configuration is untouched."""

from __future__ import annotations

import logging

import pytest
import sqlglot

from ivm.errors import SqlError
from ivm.sql_frontend.parsing import SQLGLOT_LOGGER, parse_query, quiet
from ivm.sql_frontend.planner import plan_query
from ivm.sql_frontend.positions import Origin
from ivm.sql_frontend.statements import parse_script

BAD_SCRIPTS = [
    # (script, text at the reported position)
    ("CREATE TABLE t (a INTEGER);\nCREATE VIEW v AS\n  SELECT (1 FROM t", "FROM t"),
    ("CREATE VIEW v AS SELECT a FROM t\n  WHERE a = = 2", "= 2"),
    ("CREATE TABLE t (", "("),
    ("CREATE TABLE t (a INTEGER);\n  CREATE VIEW v AS SELEC * FROM t", "SELEC"),
    ("CREATE VIEW v AS SELECT 'abc FROM t", "'abc"),
    ("CREATE TABLE t (a INTEGER);\nCREATE VIEW v AS SELECT a /* never closed", "/*"),
    ("CREATE VIEW v AS SELECT SUM(a, b) FROM t", ")"),
]


@pytest.mark.parametrize(("script", "at"), BAD_SCRIPTS)
def test_parse_errors_are_plain_and_positioned(script, at, pointed_at):
    with pytest.raises(SqlError) as info:
        parse_script(script)
    message = str(info.value)
    assert "\x1b" not in message
    assert message.startswith("cannot parse SQL at line ")
    assert pointed_at(message, script).startswith(at), message


def test_query_parse_errors_count_from_the_origin():
    with pytest.raises(SqlError, match=r"at line 4, column 2: Expecting \)") as info:
        parse_query("SELECT (1\n FROM t", Origin(offset=30, line=3, column=20))
    assert "\x1b" not in str(info.value)
    with pytest.raises(SqlError, match=r"at line 1, column 8"):
        parse_query("SELECT 'x")


def test_nothing_reaches_stderr_or_the_logs(capsys, caplog, tables, describe):
    caplog.set_level(logging.DEBUG)
    # sqlglot falls back to an opaque command for this one, and warns about it
    with pytest.raises(SqlError):
        parse_script("CREATE VIEW v AS SELEC * FROM t")
    with pytest.raises(SqlError):
        plan_query("SELECT (1 FROM orders", tables, describe)
    plan_query("SELECT customer, COUNT(*) AS n FROM orders GROUP BY customer", tables, describe)
    assert capsys.readouterr().err == ""
    assert [r for r in caplog.records if r.name.startswith(SQLGLOT_LOGGER)] == []


def test_quiet_leaves_logging_as_it_was(caplog):
    logger = logging.getLogger(SQLGLOT_LOGGER)
    filters, level, disabled = list(logger.filters), logger.level, logger.disabled
    with quiet():
        logger.warning("dropped")
        with quiet():
            logger.warning("dropped too")
    assert list(logger.filters) == filters
    assert (logger.level, logger.disabled) == (level, disabled)
    with caplog.at_level(logging.WARNING, logger=SQLGLOT_LOGGER):
        sqlglot.parse_one("CREATE VIEW v AS SELEC * FROM t", read="duckdb")  # not ivm's call
    messages = [r.getMessage() for r in caplog.records if r.name == SQLGLOT_LOGGER]
    assert any("Falling back to parsing as a 'Command'" in m for m in messages)
    assert not any("dropped" in m for m in messages)


def test_hex_string_literals_are_blobs() -> None:
    tree = parse_query("SELECT x'4142', X'', 0x10 FROM t")
    assert tree.sql("duckdb") == "SELECT UNHEX('4142'), UNHEX(''), 0 AS x10 FROM t"


@pytest.mark.parametrize(("sql", "column"), [("SELECT x'4g'", 8), ("SELECT\n x'123'", 2)])
def test_a_hex_string_of_other_digits_is_an_sql_error(sql: str, column: int) -> None:
    with pytest.raises(SqlError, match=f"column {column}: the hex string literal"):
        parse_query(sql)
