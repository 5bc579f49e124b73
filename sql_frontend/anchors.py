"""What each SQL construct starts with, for finding it in the user's text.

sqlglot keeps a position (``meta['start']``) only for identifiers, literals, ``*``
and most function names. These tables say how to get from those to the first
character of a construct that starts with a keyword (``Anchor``), a wrapper
whose text starts with its operand, or a function sqlglot keeps no position for
(its possible spellings). ``ivm.sql_frontend.positions.Locator`` uses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError


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


def anchor(*keywords: str, prefixes: tuple[str, ...] = (), stops: tuple[str, ...] = (),
           right: bool = False, most_prefixes: int = 1_000) -> Anchor:
    """An Anchor; ``;`` always stops the search."""
    return Anchor(
        frozenset(keywords), frozenset(prefixes), frozenset({";", *stops}), right, most_prefixes
    )


QUERY_STARTS = ("SELECT", "FROM", "WITH", "VALUES", "TABLE", "PIVOT", "UNPIVOT", "SUMMARIZE")

ANCHORS: dict[type[exp.Expression], Anchor] = {
    exp.Limit: anchor("LIMIT"),
    exp.Offset: anchor("OFFSET"),
    exp.Fetch: anchor("FETCH"),
    exp.Qualify: anchor("QUALIFY"),
    exp.Lateral: anchor("LATERAL"),
    exp.Pivot: anchor("PIVOT", "UNPIVOT"),
    exp.Values: anchor("VALUES"),
    exp.Rollup: anchor("ROLLUP"),
    exp.Cube: anchor("CUBE"),
    exp.GroupingSets: anchor("GROUPING"),
    exp.With: anchor("WITH"),
    exp.Distinct: anchor("DISTINCT"),
    exp.Version: anchor("FOR", "AT"),
    exp.Where: anchor("WHERE"),
    exp.Having: anchor("HAVING"),
    exp.Group: anchor("GROUP"),
    exp.Order: anchor("ORDER"),
    exp.Join: anchor(
        "JOIN",
        prefixes=("LEFT", "RIGHT", "FULL", "OUTER", "INNER", "CROSS", "NATURAL", "ASOF",
                  "SEMI", "ANTI", "POSITIONAL"),
        stops=(",",),
    ),
    exp.SetOperation: anchor("UNION", "INTERSECT", "EXCEPT", right=True),
    exp.Subquery: anchor(*QUERY_STARTS, prefixes=("(",), most_prefixes=1),
    exp.Select: anchor(*QUERY_STARTS),
    exp.Create: anchor("CREATE"),
    exp.Drop: anchor("DROP"),
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


def first_token(node: exp.Expression) -> str:
    """The first token (keyword) of the SQL sqlglot writes for ``node``, upper case."""
    try:
        tokens = DuckDB().tokenize(node.sql(dialect="duckdb"))
    except SqlglotError:
        tokens = []
    return tokens[0].text.upper() if tokens else ""


def own_scope(node: exp.Expression) -> Iterator[exp.Expression]:
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


def first_positioned(node: exp.Expression, nested_too: bool = False) -> int | None:
    """The smallest recorded offset among ``node`` and its descendants (those outside
    nested queries first; inside them too if there are none)."""
    nodes = node.walk() if nested_too else own_scope(node)
    starts = [s for s in (meta_start(n) for n in nodes) if s is not None]
    if starts:
        return min(starts)
    return None if nested_too else first_positioned(node, nested_too=True)
