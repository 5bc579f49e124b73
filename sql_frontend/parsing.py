"""Tokenize and parse SQL with sqlglot's DuckDB dialect, quietly and with positions.

Every parse error becomes an ``SqlError`` whose message names the problem and
its ``line L, column C`` in the user's script, built from sqlglot's structured
error records (its own message underlines with terminal escape codes). sqlglot
logs warnings (text it falls back to parsing as a command, syntax it cannot
convert); ``quiet()`` drops them while ivm parses and generates SQL, without
touching the logging configuration outside that window.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import Token, TokenType

from ivm.errors import SqlError
from ivm.sql_frontend.positions import TEXT_START, Locator, Origin

SQLGLOT_LOGGER = "sqlglot"


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextmanager
def quiet() -> Iterator[None]:
    """Drop the ``sqlglot`` logger's records inside the block (and only there).

    A filter on that one logger, removed on exit: other loggers, handlers and
    levels are left as the application configured them.
    """
    logger = logging.getLogger(SQLGLOT_LOGGER)
    drop = _DropAll()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def tokenize(text: str, origin: Origin = TEXT_START) -> list[Token]:
    """DuckDB tokens of ``text``; an unterminated string or comment is an SqlError."""
    tokenizer = DuckDB().tokenizer()
    try:
        with quiet():
            tokens = tokenizer.tokenize(text)
    except TokenError as error:
        offset = _failed_token_start(tokenizer, str(error.__cause__ or error))
        where = origin.advance(text, min(offset, len(text)))
        raise SqlError(
            f"cannot parse SQL at {where}: {_unfinished(text[offset : offset + 2])}"
        ) from error
    return _hex_strings(tokens, text, origin)


HEX_DIGITS = re.compile(r"(?:[0-9a-fA-F]{2})*")


def _hex_strings(tokens: list[Token], text: str, origin: Origin) -> list[Token]:
    """``tokens`` with DuckDB's BLOB literals ``x'4142'`` as one HEX_STRING token each
    (sqlglot's DuckDB tokenizer reads the name ``x`` and then a string; telling it that
    DuckDB has hex strings would also turn ``0x10``, which DuckDB reads as ``0 AS x10``,
    into one). Digits that are not hexadecimal, or an odd number of them, are an SqlError
    as in DuckDB."""
    found: list[Token] = []
    for token in tokens:
        before = found[-1] if found else None
        if (
            token.token_type == TokenType.STRING
            and before is not None
            and before.token_type == TokenType.VAR
            and before.text in ("x", "X")
            and before.end + 1 == token.start
            and text[before.start] in "xX"
        ):
            if not HEX_DIGITS.fullmatch(token.text):
                where = origin.advance(text, before.start)
                raise SqlError(f"cannot parse SQL at {where}: the hex string literal "
                               f"x'{token.text}' needs an even number of hexadecimal digits")
            found[-1] = Token(TokenType.HEX_STRING, token.text, token.line, token.col,
                              before.start, token.end, before.comments)
            continue
        found.append(token)
    return found


def _unfinished(opening: str) -> str:
    if opening.startswith("/*"):
        return "unterminated comment"
    if opening.startswith("'"):
        return "unterminated string"
    if opening.startswith('"'):
        return "unterminated quoted identifier"
    if opening.startswith("$"):
        return "unterminated dollar-quoted string"
    return f"cannot read {opening!r}"


class _Parser(DuckDBParser):
    """DuckDB's parser that also reads a PIVOT or UNPIVOT statement as a CREATE VIEW's query
    (sqlglot reads one only as a statement or a parenthesized FROM item), aliases in a
    PIVOT statement's IN lists (``ON k IN (1 AS one, 2)``), and any expression inside
    ROLLUP, CUBE and GROUPING SETS (``ROLLUP (a > b)``), as DuckDB does; a hex string
    literal (``x'4142'``, see ``_hex_strings``) is the BLOB ``unhex('4142')``."""

    def _parse_ddl_select(self) -> exp.Expression | None:
        if self._match_set((TokenType.PIVOT, TokenType.UNPIVOT)):
            unpivot = self._prev.token_type == TokenType.UNPIVOT
            return self._parse_simplified_pivot(is_unpivot=unpivot)
        return super()._parse_ddl_select()

    def _parse_in(self, this: exp.Expression | None, alias: bool = False) -> exp.In:
        if self._pivot_on and self._match(TokenType.L_PAREN, advance=False):
            start = self._index
            self._advance()
            values = self._parse_csv(self._parse_pivot_value)
            if self._match(TokenType.R_PAREN):
                return self.expression(exp.In(this=this, expressions=values))
            self._retreat(start)
        return super()._parse_in(this, alias)

    _pivot_on = False

    PRIMARY_PARSERS = {
        **DuckDBParser.PRIMARY_PARSERS,
        # x'4142' is a BLOB in DuckDB; sqlglot's DuckDB generator writes a hex string as
        # an integer.
        TokenType.HEX_STRING: lambda self, token: self.expression(
            exp.Unhex(this=exp.Literal.string(token.text))),
    }

    def _parse_cube_or_rollup(self, with_prefix: bool = False) -> exp.Cube | exp.Rollup | None:
        # DuckDB's items are any expressions (``ROLLUP (a > b)``); sqlglot reads only
        # arithmetic there.
        if with_prefix or not self._match_set((TokenType.CUBE, TokenType.ROLLUP)):
            return super()._parse_cube_or_rollup(with_prefix)
        kind = exp.Cube if self._prev.token_type == TokenType.CUBE else exp.Rollup
        return self.expression(kind(expressions=self._parse_wrapped_csv(self._parse_disjunction)))

    def _parse_grouping_set(self) -> exp.Expression | None:
        return (self._parse_grouping_sets() or self._parse_cube_or_rollup()
                or self._parse_disjunction())

    def _parse_pivot_value(self) -> exp.Expression | None:
        value = self._parse_bitwise()
        if value is not None and self._match(TokenType.ALIAS):
            name = self._parse_id_var(any_token=True)
            return self.expression(exp.PivotAlias(this=value, alias=name))
        return value

    def _parse_simplified_pivot(self, is_unpivot: bool | None = None) -> exp.Pivot:
        self._pivot_on = True
        try:
            return super()._parse_simplified_pivot(is_unpivot)
        finally:
            self._pivot_on = False


def parse_tokens(tokens: list[Token], text: str, origin: Origin = TEXT_START) -> exp.Expression:
    """Parse the tokens of one statement of ``text`` (offsets in ``text``)."""
    parser = _Parser(dialect=DuckDB(), error_message_context=len(text) + 1)
    try:
        with quiet():
            trees = parser.parse(tokens, text)
    except ParseError as error:
        raise parse_error(error, text, origin, tokens) from error
    except SqlglotError as error:  # anything else sqlglot refuses while parsing
        start = tokens[0].start if tokens else 0
        where = origin.advance(text, start)
        raise SqlError(f"cannot parse SQL at {where}: {plain(str(error))}") from error
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        where = origin.advance(text, tokens[0].start if tokens else 0)
        raise SqlError(f"cannot parse SQL at {where}: expected one statement, found {len(trees)}")
    return trees[0]


def parse_query(text: str, origin: Origin = TEXT_START) -> exp.Expression:
    """Parse ``text``, one statement (a view's query), positions relative to ``text``."""
    tokens = tokenize(text, origin)
    if not tokens:
        raise SqlError(f"cannot parse SQL at {origin}: the query is empty")
    expect_query(tokens, text, origin)
    tree = parse_tokens(tokens, text, origin)
    if isinstance(tree, exp.Command):
        raise SqlError(f"cannot parse SQL at {origin}: {_snippet(tree)}")
    return tree


def expect_query(tokens: list[Token], text: str, origin: Origin = TEXT_START) -> None:
    """SqlError when a query's first word is a plain name (``SELEC``): no query starts so,
    and sqlglot would report a later, more confusing position."""
    if tokens and tokens[0].token_type == TokenType.VAR:
        where = origin.advance(text, tokens[0].start)
        raise SqlError(
            f"cannot parse SQL at {where}: expected a query (SELECT, WITH, FROM…), "
            f"found {tokens[0].text!r}"
        )


def parse_error(
    error: ParseError, text: str, origin: Origin, tokens: list[Token] | None = None
) -> SqlError:
    """An SqlError for sqlglot's ``error``: its description and the position of the
    offending token in script coordinates, without terminal escape codes."""
    entries = getattr(error, "errors", None) or []
    if not entries:
        start = tokens[0].start if tokens else 0
        return SqlError(f"cannot parse SQL at {origin.advance(text, start)}: {plain(str(error))}")
    entry = entries[0]
    context = entry.get("start_context")
    if context is not None and len(context) <= len(text):
        # With the whole text as context, the context before the token is all that precedes it.
        offset = len(context)
    else:
        offset = _offset_of(text, entry.get("line") or 1, entry.get("col") or 1)
    where = origin.advance(text, offset)
    description = plain(entry.get("description") or str(error))
    highlight = plain(entry.get("highlight") or "")
    near = f" (near {highlight!r})" if highlight else ""
    return SqlError(f"cannot parse SQL at {where}: {description}{near}")


def _failed_token_start(tokenizer: object, message: str) -> int:
    """Where the token the tokenizer could not finish starts (its state, else its message)."""
    state = getattr(tokenizer, "_core", tokenizer)
    start = getattr(state, "_start", None)
    if isinstance(start, int):
        return start
    found = re.search(r"from \d+:(\d+)", message)
    return int(found[1]) if found else 0


def _offset_of(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + max(column - 1, 0)


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SQLGLOT_CLASS = re.compile(r"<class 'sqlglot\.[\w.]*?(\w+)'>")
SQLGLOT_TOKEN = re.compile(r"<Token token_type: [\w.]+, text: (.*?), line: \d+.*?>")


def plain(message: str) -> str:
    """``message`` without terminal escape codes (sqlglot underlines with them) and with
    sqlglot's class names short (``<class 'sqlglot.expressions.core.EQ'>`` → ``EQ``) and its
    tokens as their text (``<Token token_type: TokenType.DISTINCT, text: distinct…>``)."""
    return SQLGLOT_TOKEN.sub(r"'\1'", SQLGLOT_CLASS.sub(r"\1", ANSI_ESCAPE.sub("", message)))


def _snippet(tree: exp.Expression) -> str:
    text = tree.sql(dialect="duckdb")
    return text if len(text) <= 200 else text[:197] + "..."


__all__ = ["Locator", "Origin", "parse_error", "parse_query", "parse_tokens", "quiet", "tokenize"]
