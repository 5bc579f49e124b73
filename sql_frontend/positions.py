"""Say where in the user's SQL text a construct is, for error messages.

Positions are 1-based ``line L, column C`` in the text the user passed to
``db.execute``: a view's query is planned from its own text, so an ``Origin``
says where that text starts in the script.

sqlglot records where only some nodes came from: identifiers, literals, ``*``
and most function names carry ``meta['start']`` (a character offset; its
``meta['col']`` is where the token *ends*). Constructs made of keywords
(LIMIT, LEFT JOIN, QUALIFY, DISTINCT ON, a subquery's parenthesis…) carry
none, so a ``Locator`` tokenizes the text and walks back from the first
positioned token inside the construct to the keyword that starts it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from ivm.sql_frontend.anchors import (
    ANCHORS,
    KEYWORD_LED,
    WRAPPERS,
    Anchor,
    anchor,
    first_positioned,
    first_token,
    function_spellings,
    meta_start,
)

SNIPPET = 80
"""Longest SQL excerpt quoted in an error message."""

_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})
_NOT_WORDS = frozenset({TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER})


@dataclass(frozen=True)
class Origin:
    """Where a text starts in the script the user passed: a character offset and its
    1-based line and column."""

    offset: int = 0
    line: int = 1
    column: int = 1

    def advance(self, text: str, offset: int) -> Origin:
        """The position of ``text[offset]``, where ``text`` starts at this origin."""
        before = text[:offset]
        newlines = before.count("\n")
        if newlines == 0:
            return Origin(self.offset + offset, self.line, self.column + offset)
        return Origin(self.offset + offset, self.line + newlines, offset - before.rfind("\n"))

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


TEXT_START = Origin()
"""The default origin: positions relative to the text itself."""


class Locator:
    """Finds constructs of parsed SQL in the text they were parsed from.

    ``text`` is that text (None when unknown: positions then come from sqlglot's
    records alone), ``origin`` where it starts in the user's script, ``tokens``
    its tokens when already known.
    """

    def __init__(
        self, text: str | None, origin: Origin = TEXT_START, tokens: list[Token] | None = None
    ) -> None:
        self.text = text
        self.origin = origin
        if tokens is not None:
            self.__dict__["tokens"] = tokens

    @cached_property
    def tokens(self) -> list[Token]:
        """The text's tokens (empty when it does not tokenize)."""
        if not self.text:
            return []
        try:
            return DuckDB().tokenize(self.text)  # (quiet: the tokenizer never logs)
        except SqlglotError:
            return []

    @cached_property
    def _starts(self) -> list[int]:
        return [t.start for t in self.tokens]

    # -- positions ---------------------------------------------------------------------------

    def position(self, offset: int) -> Origin:
        """Script position of character ``offset`` of the text."""
        return self.origin.advance(self.text or "", offset)

    def where(self, node: exp.Expression | None) -> Origin:
        """Script position of the first character of ``node`` (the text's start if unknown)."""
        offset = self.start(node) if node is not None else None
        if offset is None:
            return self.origin
        if self.text is None:
            return self._from_meta(node) if node is not None else self.origin
        return self.position(offset)

    def describe(
        self, construct: str, node: exp.Expression | None, snippet: str | None = None
    ) -> str:
        """``construct (at line L, column C: <its text>)`` for an error message: the user's
        own text of ``node`` where it can be found, else the SQL sqlglot writes for it."""
        where = self.where(node)
        if node is None:
            return f"{construct} (at {where})"
        if snippet is None:
            snippet = self.excerpt(node) or node.sql(dialect="duckdb")
        snippet = " ".join(snippet.split())
        if len(snippet) > SNIPPET:
            snippet = snippet[: SNIPPET - 3] + "..."
        return f"{construct} (at {where}: {snippet})"

    def excerpt(self, node: exp.Expression) -> str | None:
        """The text of ``node``: from its first character through its last positioned token,
        and on until its parentheses balance, a call's parentheses and a trailing ``OVER (…)``
        included (None when the text is unknown)."""
        start = self.start(node)
        index = self._index(start) if start is not None else None
        if index is None:
            return None
        ends = [n._meta["end"] for n in node.walk() if n._meta and "end" in n._meta]  # noqa: SLF001
        last = max([self.tokens[index].end, *ends])
        depth, j = 0, index
        while j < len(self.tokens):
            token = self.tokens[j]
            if token.start > last and depth <= 0 and not self._continues(j):
                break
            depth += (token.token_type in _OPEN) - (token.token_type in _CLOSE)
            if depth < 0:
                break
            j += 1
        assert self.text is not None
        return self.text[start : self.tokens[j - 1].end + 1]

    def _continues(self, j: int) -> bool:
        """Token ``j`` still belongs to what precedes it: a call's ``(`` or ``OVER``."""
        token = self.tokens[j]
        if token.token_type == TokenType.L_PAREN:
            return j > 0 and self._is_word(self.tokens[j - 1])
        return self._matches(token, frozenset({"OVER"}))

    def word_at(self, node: exp.Expression) -> str | None:
        """The word (keyword or name) ``node`` starts with in the text, upper case."""
        token = self.token_at(node)
        return token.text.upper() if token is not None and self._is_word(token) else None

    def token_at(self, node: exp.Expression) -> Token | None:
        """The token ``node`` starts with in the text, if known."""
        offset = self.start(node)
        index = self._index(offset) if offset is not None else None
        return self.tokens[index] if index is not None else None

    def _from_meta(self, node: exp.Expression) -> Origin:
        """Without the text: the line of the first positioned token and its start column."""
        best: dict | None = None
        for part in node.walk():
            meta = part._meta  # noqa: SLF001
            if meta and "start" in meta and (best is None or meta["start"] < best["start"]):
                best = meta
        if best is None or "line" not in best:
            return self.origin
        column = best["col"] - (best.get("end", best["start"]) - best["start"])
        line = self.origin.line + best["line"] - 1
        column = column + self.origin.column - 1 if best["line"] == 1 else column
        return Origin(self.origin.offset + best["start"], line, column)

    # -- finding a construct's first character -------------------------------------------------

    def start(self, node: exp.Expression) -> int | None:
        """Offset in the text of ``node``'s first character, or None."""
        own = meta_start(node)
        if own is not None:
            return own
        if isinstance(node, exp.Order) and isinstance(node.this, exp.Expression):
            return self.start(node.this)  # ORDER BY inside a call: starts at the argument
        if isinstance(node, KEYWORD_LED):
            return self._anchored(node, anchor(first_token(node), stops=(",",)))
        for kind, rule in ANCHORS.items():
            if isinstance(node, kind):
                return self._anchored(node, rule)
        if isinstance(node, WRAPPERS) and isinstance(node.this, exp.Expression):
            return self.start(node.this)
        if node.parent is None and not isinstance(node, exp.Condition):
            return self._statement_start(node)  # a whole statement
        if isinstance(node, exp.Func):
            return self._function(node)
        found = first_positioned(node)
        return found if found is not None else self._by_spelling(node)

    def _index(self, offset: int) -> int | None:
        """Index of the token starting at ``offset``."""
        index = bisect.bisect_left(self._starts, offset)
        if index < len(self.tokens) and self.tokens[index].start == offset:
            return index
        return None

    @staticmethod
    def _is_word(token: Token) -> bool:
        """A keyword or an unquoted name (not a string, number or symbol)."""
        first = token.text[:1]
        return token.token_type not in _NOT_WORDS and (first.isalpha() or first == "_")

    def _matches(self, token: Token, words: frozenset[str]) -> bool:
        if token.token_type in _NOT_WORDS:
            return False
        return token.text.upper() in words

    def _anchored(self, node: exp.Expression, rule: Anchor) -> int | None:
        """Walk back from the construct's first positioned token, over parenthesized groups,
        to its keyword (and the prefixes before it)."""
        inside = node.args.get("expression") if rule.right else node
        first = first_positioned(inside) if isinstance(inside, exp.Expression) else None
        index = self._index(first) if first is not None else None
        if index is None:
            return first if first is not None else self._by_spelling(node)
        depth = 0
        for j in range(index - 1, -1, -1):
            token = self.tokens[j]
            if token.token_type in _CLOSE:
                depth += 1
                continue
            if token.token_type in _OPEN:
                depth = max(depth - 1, 0)
                continue
            if depth:
                continue
            if self._matches(token, rule.keywords):
                keyword = j
                while (
                    j > 0
                    and keyword - j < rule.most_prefixes
                    and self._matches(self.tokens[j - 1], rule.prefixes)
                ):
                    j -= 1
                return self.tokens[j].start
            if token.text.upper() in rule.stops:
                break
        return first

    def _function(self, node: exp.Func) -> int | None:
        """A function without a recorded position: the name before its opening parenthesis."""
        first = first_positioned(node)
        index = self._index(first) if first is not None else None
        if index is None:
            return first if first is not None else self._by_spelling(node)
        spellings = function_spellings(node)
        fallback: int | None = None
        depth = 0
        for j in range(index - 1, 0, -1):
            token = self.tokens[j]
            if token.token_type in _CLOSE:
                depth += 1
            elif token.token_type in _OPEN and depth:
                depth -= 1
            elif token.token_type == TokenType.L_PAREN and self._is_word(self.tokens[j - 1]):
                name = self.tokens[j - 1]
                if name.text.upper() in spellings:
                    return name.start
                fallback = name.start if fallback is None else fallback
            elif token.token_type == TokenType.SEMICOLON:
                break
        return fallback if fallback is not None else first

    def _statement_start(self, node: exp.Expression) -> int | None:
        """The first token of the statement ``node`` (a whole statement) was parsed from."""
        first = first_positioned(node)
        index = self._index(first) if first is not None else None
        if index is None:
            return first if first is not None else (0 if self.text is not None else None)
        while index > 0 and self.tokens[index - 1].token_type != TokenType.SEMICOLON:
            index -= 1
        return self.tokens[index].start

    def _by_spelling(self, node: exp.Expression) -> int | None:
        """A node without any positioned token (``CURRENT_DATE``, ``UNIQUE``): the k-th token
        spelled like it, k its rank among like nodes of the tree."""
        spellings = function_spellings(node) if isinstance(node, exp.Func) else {first_token(node)}
        same = [n for n in node.root().walk(bfs=False) if type(n) is type(node)]
        rank = next((i for i, n in enumerate(same) if n is node), 0)
        found = [t.start for t in self.tokens if self._matches(t, frozenset(spellings))]
        if not found:
            return None
        return found[min(rank, len(found) - 1)]
