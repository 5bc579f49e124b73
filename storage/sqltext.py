"""SQL text for Z-sets stored in DuckDB: quoting, column lists, consolidation.

The lowest layer of SQL building, shared by the engine (``ivm.plan.sql``) and by
storage (traces, readers). Knows rows and weights, nothing about operators.
"""

from __future__ import annotations

from collections.abc import Sequence

WEIGHT = "__w"
"""Name of the weight column of every Z-set batch and trace."""


def quote(identifier: str) -> str:
    """Quote an identifier for DuckDB SQL, whatever characters it holds."""
    return '"' + identifier.replace('"', '""') + '"'


def unquote(identifier: str) -> str:
    """The plain name of an identifier ``quote`` made (unquoted ones as they are)."""
    if len(identifier) >= 2 and identifier[0] == identifier[-1] == '"':
        return identifier[1:-1].replace('""', '"')
    return identifier


W = quote(WEIGHT)
"""The weight column, quoted for SQL."""


def column_list(names: Sequence[str], alias: str | None = None) -> str:
    """Quoted, comma-separated column names, optionally qualified by ``alias``."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + quote(n) for n in names)


def consolidate_sql(source: str, names: Sequence[str], positive_only: bool = False) -> str:
    """Sum the weights of equal rows of ``source``; drop rows whose weight sums to zero
    (or, with ``positive_only``, is not positive).

    Rows are compared as GROUP BY compares them: NULL equals NULL.
    """
    having = f"SUM({W}) > 0" if positive_only else f"SUM({W}) <> 0"
    if not names:
        return f"SELECT SUM({W})::BIGINT AS {W} FROM ({source}) AS __c HAVING {having}"
    cols = column_list(names)
    return (
        f"SELECT {cols}, SUM({W})::BIGINT AS {W} FROM ({source}) AS __c "
        f"GROUP BY {cols} HAVING {having}"
    )


def expand_sql(source: str, names: Sequence[str]) -> str:
    """A bag with one row per copy of a consolidated Z-set with positive weights."""
    return (
        f"SELECT {column_list(names, '__e')} FROM ({source}) AS __e, "
        f"range(CAST(__e.{W} AS BIGINT)) AS __copies"
    )


WIDE_NUMBERS = frozenset({"HUGEINT", "UHUGEINT", "INT128", "UINT128", "UUID"})


def hashes_halves(type_: str) -> bool:
    """Whether DuckDB stores values of ``type_`` as 128-bit numbers (HUGEINT, UHUGEINT,
    UUID, a DECIMAL of more than 18 digits), whose ``hash`` is the xor of the two halves'
    hashes: 0 and -1, and every number whose halves are equal, hash alike."""
    spelled = type_.upper().strip()
    if spelled in WIDE_NUMBERS:
        return True
    if spelled.startswith(("DECIMAL(", "NUMERIC(")):
        return int(spelled.split("(")[1].split(",")[0].strip(" )")) > 18
    return False


def key_hash_sql(columns: Sequence[str], alias: str = "") -> str:
    """SQL of a key's 64-bit hash, as arrangements are sorted and searched by: DuckDB's
    ``hash`` of the key's columns (0 for none)."""
    prefix = f"{alias}." if alias else ""
    if not columns:
        return "0::UBIGINT"
    return f"hash({', '.join(prefix + quote(c) for c in columns)})"
