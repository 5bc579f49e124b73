"""Moments: the running sums an invertible (or running) aggregate form keeps per group.

Declared apart from the registry (``ivm.functions.aggregates``) so that the
running forms (``ivm.functions.running``), which the registry refers to, can
build on them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Moment:
    """One running sum kept per group: ``SUM(term · weight)`` with ``{x}`` the argument.

    ``type``: the type it is kept as (None: the type DuckDB gives the sum).
    """

    name: str
    term: str  # SQL over {x}; the weight multiplies it
    type: str | None = None


@dataclass(frozen=True)
class Invertible:
    """How an invertible function is kept: its moments and the value they give.

    ``finalize`` gets each moment's SQL (a column of the state) by name and
    returns the value's SQL (NULL where the group has no argument values).
    ``compute``, where given, is the same in memory: it gets each moment's values (an
    Arrow array, no NULLs) by name and returns the values (an Arrow array DuckDB casts
    to the call's type as it would cast ``finalize``'s), or None for moments of a type
    it does not handle.
    """

    moments: tuple[Moment, ...]
    finalize: Callable[[Mapping[str, str]], str]
    compute: Callable[[Mapping[str, pa.Array]], pa.Array | None] | None = None


NON_NULL = Moment("n", "CASE WHEN {x} IS NULL THEN 0 ELSE 1 END", "BIGINT")
"""Rows whose argument is not NULL."""
