"""Statements of a script that ivm refuses, found before or after sqlglot reads them.

DuckDB statements that sqlglot misreads (``CHECKPOINT`` as a column) or cannot parse
(``LOAD``, ``VACUUM``, ``EXPORT DATABASE``…) are refused by their first words, naming the
statement; CREATE of anything but a table or a view is refused by what it creates; and a
statement sqlglot could only read as an opaque command is a parse error saying where.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from ivm.errors import SqlError, UnsupportedSQL
from ivm.sql_frontend.parsing import expect_query, parse_tokens
from ivm.sql_frontend.positions import Locator

DUCKDB_STATEMENTS = frozenset({
    "CHECKPOINT", "FORCE", "LOAD", "VACUUM", "CALL", "EXPORT", "IMPORT", "PREPARE",
    "EXECUTE", "DEALLOCATE", "RESET", "DETACH", "ATTACH", "INSTALL", "UPDATE_EXTENSIONS",
})
"""DuckDB statements that sqlglot reads as something else (``CHECKPOINT`` as a column) or
not at all (``LOAD``, ``VACUUM``, ``EXPORT DATABASE``…): refused by their first word."""

CREATE_MODIFIERS = frozenset({"OR", "REPLACE", "TEMP", "TEMPORARY", "UNIQUE", "PERSISTENT"})
CREATE_OTHER = frozenset({"TYPE", "SEQUENCE", "MACRO", "FUNCTION", "INDEX", "SCHEMA", "SECRET"})
"""What CREATE may make besides tables and views (each refused by name)."""

UNSUPPORTED_HINT = "use CREATE TABLE, CREATE VIEW, DROP, ALTER TABLE; change data with ingest()"


def refused_statement(tokens: list[Token], sql: str, locator: Locator) -> UnsupportedSQL | None:
    """The refusal of a statement ivm does not run that sqlglot would misread or fail to
    parse (found from its first words), else None."""
    words = [t.text.upper() for t in tokens[:6]]
    where = locator.position(tokens[0].start)
    text = sql[tokens[0].start : tokens[-1].end + 1]
    text = text if len(text) <= 80 else text[:77] + "..."
    if words[0] in DUCKDB_STATEMENTS:
        name = "FORCE CHECKPOINT" if words[:2] == ["FORCE", "CHECKPOINT"] else words[0]
        return UnsupportedSQL(f"{name} statement (at {where}: {text}) is not supported: "
                              f"{UNSUPPORTED_HINT}")
    if words[0] == "CREATE":
        kinds = [w for w in words[1:] if w not in CREATE_MODIFIERS]
        if kinds and kinds[0] in CREATE_OTHER:
            return UnsupportedSQL(f"CREATE {kinds[0]} (at {where}: {text}) is not supported")
    return None


def query_start(tokens: list[Token]) -> int | None:
    """Index of the first token of a CREATE VIEW's query: the one after its first AS."""
    for index, token in enumerate(tokens[:-1]):
        if token.token_type == TokenType.ALIAS:
            return index + 1
    return None


def command_error(
    tree: exp.Command, tokens: list[Token], sql: str, locator: Locator
) -> SqlError:
    """sqlglot read a statement as an opaque command: say where it fails to parse. For a
    CREATE VIEW that is its query, parsed alone for sqlglot's error."""
    start = query_start(tokens)
    if start is not None and tokens[0].text.upper() == "CREATE":
        try:
            expect_query(tokens[start:], sql)
            parse_tokens(tokens[start:], sql)
        except SqlError as error:
            return error
    where = locator.position(tokens[0].start)
    text = sql[tokens[0].start : tokens[-1].end + 1]
    text = text if len(text) <= 200 else text[:197] + "..."
    return SqlError(f"cannot parse SQL at {where}: {text}")
