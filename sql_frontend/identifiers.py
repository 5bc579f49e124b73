"""Names a user may give: not empty, no NUL, not one of ivm's own (``__ivm_…``)."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError
from ivm.sql_frontend.positions import Locator

RESERVED_PREFIX = "__ivm_"
"""Names of ivm's state (tables, traces) and of its own columns start with this."""


def check_identifiers(tree: exp.Expression, locator: Locator) -> None:
    """Refuse names DuckDB cannot hold as written: empty ones, and ones with a NUL
    character (DuckDB would cut the name at it, so it would name something else)."""
    for identifier in tree.find_all(exp.Identifier):
        if identifier.name == "" or "\x00" in identifier.name:
            what = "an empty name" if identifier.name == "" else "a name with a NUL character"
            raise SqlError(f"{locator.describe(what, identifier)}: names need at least one "
                           "character, and no NUL")


def not_reserved(column: str, node: exp.Expression | None, locator: Locator) -> None:
    """Refuse a column name of ivm's own columns (``__ivm_…``: row hashes, positions),
    which every statement over the table would confuse with them."""
    if column.lower().startswith(RESERVED_PREFIX):
        raise SqlError(
            f"{locator.describe('column ' + repr(column), node)}: names starting with "
            f"{RESERVED_PREFIX!r} are reserved for ivm's own columns"
        )
