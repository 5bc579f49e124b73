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
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

SNIPPET = 80
"""Longest SQL excerpt quoted in an error message."""


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


@dataclass(frozen=True)
class Anchor:
    """How to find the keyword a construct starts with.

    ``keywords``: the keyword itself (searched backwards from the construct's first
    positioned token, skipping parenthesized groups); ``prefixes``: keywords that may
    precede it and still belong to the construct (LEFT OUTER before JOIN); ``stops``:
    tokens that end the search unsuccessfully. ``right``: look from the right operand
    (set operations, whose keyword follows their left side).
    """

    keywords: frozenset[str]
    prefixes: frozenset[str] = frozenset()
    stops: frozenset[str] = frozenset({";"})
    right: bool = False
    most_prefixes: int = 1_000


def _anchor(*keywords: str, prefixes: tuple[str, ...] = (), stops: tuple[str, ...] = (),
            right: bool = False, most_prefixes: int = 1_000) -> Anchor:
    return Anchor(
        frozenset(keywords), frozenset(prefixes), frozenset({";", *stops}), right, most_prefixes
    )


QUERY_STARTS = ("SELECT", "FROM", "WITH", "VALUES", "TABLE", "PIVOT", "UNPIVOT", "SUMMARIZE")

ANCHORS: dict[type[exp.Expression], Anchor] = {
    exp.Limit: _anchor("LIMIT"),
    exp.Offset: _anchor("OFFSET"),
    exp.Fetch: _anchor("FETCH"),
    exp.Qualify: _anchor("QUALIFY"),
    exp.Lateral: _anchor("LATERAL"),
    exp.Pivot: _anchor("PIVOT", "UNPIVOT"),
    exp.Values: _anchor("VALUES"),
    exp.Rollup: _anchor("ROLLUP"),
    exp.Cube: _anchor("CUBE"),
    exp.GroupingSets: _anchor("GROUPING"),
    exp.With: _anchor("WITH"),
    exp.Distinct: _anchor("DISTINCT"),
    exp.Version: _anchor("FOR", "AT"),
    exp.Where: _anchor("WHERE"),
    exp.Having: _anchor("HAVING"),
    exp.Group: _anchor("GROUP"),
    exp.Order: _anchor("ORDER"),
    exp.Join: _anchor(
        "JOIN",
        prefixes=("LEFT", "RIGHT", "FULL", "OUTER", "INNER", "CROSS", "NATURAL", "ASOF",
                  "SEMI", "ANTI", "POSITIONAL"),
        stops=(",",),
    ),
    exp.SetOperation: _anchor("UNION", "INTERSECT", "EXCEPT", right=True),
    exp.Subquery: _anchor(*QUERY_STARTS, prefixes=("(",), most_prefixes=1),
    exp.Select: _anchor(*QUERY_STARTS),
    exp.Create: _anchor("CREATE"),
    exp.Drop: _anchor("DROP"),
}
"""Constructs that start with a keyword sqlglot keeps no position for."""

WRAPPERS = (
    exp.Window, exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls, exp.Alias,
    exp.Ordered, exp.Binary, exp.Bracket,
)
"""Nodes whose text starts where their first operand (``this``) starts."""

KEYWORD_LED = (exp.ColumnConstraint, exp.Constraint, exp.PrimaryKey, exp.ForeignKey,
               exp.UniqueColumnConstraint, exp.CheckColumnConstraint)
"""Nodes whose text starts with the first keyword sqlglot writes for them."""

FUNCTION_SPELLINGS: dict[type[exp.Expression], frozenset[str]] = {
    exp.GroupConcat: frozenset({"STRING_AGG", "LISTAGG", "GROUP_CONCAT", "STRINGAGG"}),
    exp.ArrayAgg: frozenset({"LIST", "ARRAY_AGG"}),
    exp.PercentileCont: frozenset({"QUANTILE_CONT", "PERCENTILE_CONT"}),
    exp.PercentileDisc: frozenset({"QUANTILE_DISC", "PERCENTILE_DISC"}),
    exp.Quantile: frozenset({"QUANTILE"}),
}
"""Names DuckDB's parser reads as these classes beyond the class's own ``sql_names``."""

_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})
_NOT_WORDS = frozenset({TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER})


def meta_start(node: exp.Expression) -> int | None:
    """The character offset sqlglot recorded for ``node`` itself, if any."""
    meta = node._meta  # noqa: SLF001 - reading sqlglot's own position record
    return meta.get("start") if meta else None


def function_spellings(node: exp.Expression) -> frozenset[str]:
    """Upper-case names under which ``node``'s function may appear in DuckDB SQL."""
    if isinstance(node, exp.Anonymous):
        return frozenset({node.name.upper()})
    names = set(FUNCTION_SPELLINGS.get(type(node), ()))
    if isinstance(node, exp.Func):
        names.update(n.upper() for n in node.sql_names())
        functions = DuckDB.parser_class.FUNCTIONS
        names.update(k for k, v in functions.items() if getattr(v, "__self__", None) is type(node))
    names.add(node.sql(dialect="duckdb").split("(")[0].strip().upper())
    return frozenset(names)


def _first_token(node: exp.Expression) -> str:
    """The first token (keyword) of the SQL sqlglot writes for ``node``, upper case."""
    try:
        tokens = DuckDB().tokenize(node.sql(dialect="duckdb"))
    except SqlglotError:
        tokens = []
    return tokens[0].text.upper() if tokens else ""


def _own_scope(node: exp.Expression) -> Iterator[exp.Expression]:
    """``node`` and its descendants, leaving out queries nested inside it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in current.iter_expressions():
            nested = isinstance(child, exp.Query) and not (
                current is node or isinstance(current, exp.SetOperation)
            )
            if not nested:
                stack.append(child)


def first_positioned(node: exp.Expression, own_scope: bool = True) -> int | None:
    """The smallest recorded offset among ``node`` and its descendants (preferring
    those outside nested queries)."""
    nodes = _own_scope(node) if own_scope else node.walk()
    starts = [s for s in (meta_start(n) for n in nodes) if s is not None]
    if starts:
        return min(starts)
    return first_positioned(node, own_scope=False) if own_scope else None


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
            return self._anchored(node, _anchor(_first_token(node), stops=(",",)))
        for kind, anchor in ANCHORS.items():
            if isinstance(node, kind):
                return self._anchored(node, anchor)
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

    def _anchored(self, node: exp.Expression, anchor: Anchor) -> int | None:
        inside = node.args.get("expression") if anchor.right else node
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
            if self._matches(token, anchor.keywords):
                first_token = j
                while (
                    j > 0
                    and first_token - j < anchor.most_prefixes
                    and self._matches(self.tokens[j - 1], anchor.prefixes)
                ):
                    j -= 1
                return self.tokens[j].start
            if token.text.upper() in anchor.stops:
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
        spellings = function_spellings(node) if isinstance(node, exp.Func) else {_first_token(node)}
        same = [n for n in node.root().walk(bfs=False) if type(n) is type(node)]
        rank = next((i for i, n in enumerate(same) if n is node), 0)
        found = [t.start for t in self.tokens if self._matches(t, frozenset(spellings))]
        if not found:
            return None
        return found[min(rank, len(found) - 1)]
