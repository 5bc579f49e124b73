"""Values DuckDB calls equal that are not the same value, told apart.

DuckDB's ``=``, ``GROUP BY`` and ``hash`` hold ``-0.0 = 0.0``, every NaN equal
to every other (whatever its sign and payload) and ``INTERVAL '1 day' =
INTERVAL '24 hours'``; yet ``CAST(d AS VARCHAR)``, ``1/d`` or ``ts + i`` evaluate
differently on each. A base table holds the values it was given, byte for byte,
so the rows a delete takes out are the stored ones (``ivm.execution.constraints``)
and a table's changes are consolidated with such values kept apart.

``exact_terms`` are SQL terms, per column, that are equal (null-safe) only for
identical values: the column itself, plus for a float its bits when it is a zero
or a NaN (``::BIT``, the only cast that reads them; ≈2 ns a value when only those
are cast), and for an interval, or a nested value that may hold floats or
intervals, its text. Types whose equal values are identical (integers, decimals
of one scale, strings without a collation, timestamps…) need the column alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ivm.plan.sql import W, column_list
from ivm.schema import Column, Schema, quote
from ivm.storage.sqltext import hashes_halves

_FLOATS = frozenset({"FLOAT", "REAL", "FLOAT4", "DOUBLE", "FLOAT8"})
_UNEXACT_WORDS = frozenset({*_FLOATS, "INTERVAL", "VARIANT"})
"""Type words whose values may be equal without being identical (inside nested types too)."""


def exact_terms(columns: Sequence[Column], alias: str = "") -> list[str]:
    """SQL terms equal (as a tuple, NULL matching NULL) only for byte-identical rows."""
    terms = []
    for column in columns:
        ref = f"{alias}.{quote(column.name)}" if alias else quote(column.name)
        spelled = column.type.upper().strip()
        terms.append(ref)
        if spelled in _FLOATS:
            terms.append(f"CASE WHEN isnan({ref}) OR {ref} = 0 THEN {ref}::BIT END")
        elif _UNEXACT_WORDS & set(re.findall(r"[A-Z_0-9]+", spelled)):
            terms.append(f"{ref}::VARCHAR")
    return terms


def hash_terms(columns: Sequence[Column], alias: str = "") -> list[str]:
    """``exact_terms`` fit for hashing: with a second term for each value DuckDB's
    ``hash`` does not tell apart from another value of its type.

    A 128-bit number (HUGEINT, UHUGEINT, UUID, a DECIMAL wider than 18 digits) hashes as
    the exclusive or of its two halves' hashes, so 0 and -1 (and any number whose halves
    are equal, or two numbers with their halves swapped) hash alike. A number's second
    term is its DOUBLE (a tenth of the cost of its text, which an epoch's appends of
    wide sums paid): the hash and the DOUBLE together tell numbers apart up to 64-bit
    chance, since two numbers of one DOUBLE are near each other, so their upper halves
    are equal (and then equal hashes mean equal lower halves: the halves' hash is a
    bijection) or adjacent, where only chance makes the hashes equal. A UUID's second
    term is its text; a nested value's too (its hash holds NULL, [] and [NULL] alike).
    Other scalars' hashes tell their values apart (up to 64-bit chance)."""
    terms = exact_terms(columns, alias)
    for column in columns:
        ref = f"{alias}.{quote(column.name)}" if alias else quote(column.name)
        if not _hashes_poorly(column.type) or f"{ref}::VARCHAR" in terms:
            continue
        numeric = hashes_halves(column.type) and column.type.upper().strip() != "UUID"
        terms.append(f"{ref}::DOUBLE" if numeric else f"{ref}::VARCHAR")
    return terms


def _hashes_poorly(type_: str) -> bool:
    """Whether DuckDB's ``hash`` of values of ``type_`` is equal for some different values
    (see ``hash_terms``)."""
    spelled = type_.upper().strip()
    return "[" in spelled or spelled.startswith(("STRUCT", "MAP", "UNION")) or (
        hashes_halves(spelled)
    )


def exact_hash_sql(columns: Sequence[Column], alias: str = "", reverse: bool = False) -> str:
    """A 64-bit hash of the row that tells apart values DuckDB calls equal, and values
    its ``hash`` does not tell apart (``hash_terms``); with ``reverse``, another one, of
    the terms in reverse order and their count."""
    terms = hash_terms(columns, alias)
    if reverse:
        return f"hash({', '.join(reversed(terms))}, {len(terms)})"
    return f"hash({', '.join(terms)})"


def consolidate_exact_sql(source: str, schema: Schema) -> str:
    """``source`` (``schema``'s columns and a weight) consolidated: the weights of
    byte-identical rows summed, zeros dropped; rows DuckDB calls equal stay apart."""
    groups = ", ".join(exact_terms(schema.columns))
    return (
        f"SELECT {column_list(schema.names)}, SUM({W})::BIGINT AS {W} FROM ({source}) AS __x "
        f"GROUP BY {groups} HAVING SUM({W}) <> 0"
    )


def row_hash_sql(columns: Sequence[tuple[str, str]]) -> str:
    """SQL of a row's hash, which tells rows apart (``columns``: names and types): DuckDB's
    hash of the row's ``hash_terms`` (the values, and what tells apart values DuckDB
    calls equal or hashes alike: -0.0 and 0.0, HUGEINT 0 and -1, NULL and [])."""
    if not columns:
        return "0::UBIGINT"
    return f"hash({', '.join(hash_terms([Column(n, t) for n, t in columns]))})"
