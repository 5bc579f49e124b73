"""The DuckDB settings that change what an expression evaluates to, kept with the state.

A view's state holds values its SQL computed, and DuckDB evaluates some SQL
differently under some settings:

* ``TimeZone`` and ``Calendar`` (ICU): every function of a TIMESTAMPTZ
  (``CAST(ts AS DATE)``, ``hour(ts)``, ``date_trunc``…). DuckDB takes ``TimeZone``
  from the process's ``TZ``, so state created under one ``TZ`` and reopened under
  another would compute a delete's retraction in another zone than its insert;
* ``default_order`` and ``default_null_order``: an ORDER BY without a direction
  (so which rows an ``ORDER BY … LIMIT`` keeps);
* ``default_collation``: every string comparison, grouping and ordering;
* ``integer_division`` (``/``), ``ieee_floating_point_ops`` (``1/0``, ``log(-1)``),
  ``disable_timestamptz_casts``, ``scalar_subquery_error_on_multiple_rows``,
  ``dialect_compatibility_mode``.

All of them are recorded in the catalog when the state is created (or first
opened by a version that records them) and set on every connection ivm opens on
the state: the session's own, the Spark tasks' on the executors, the ad-hoc
reads'. Only the first two may be chosen (``ivm.connect(path,
settings={"TimeZone": "UTC"})``); the others keep DuckDB's defaults, which the
SQL ivm generates relies on (an internal ``ORDER BY`` must ascend, a ``/`` of
sums must not truncate, an arrangement's key hash must agree with ``=``).

Left out, from ``duckdb_settings()``: settings that change how a query runs but not
its answer (``threads``, ``memory_limit``, the optimizer's and the join thresholds),
how results are handed over (``arrow_*``), or only whether a query binds
(``order_by_non_integer_literal``, ``preserve_identifier_case``: ivm quotes every
name it generates).
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

EVALUATION: tuple[str, ...] = (
    "TimeZone",
    "Calendar",
    "default_collation",
    "default_order",
    "default_null_order",
    "integer_division",
    "ieee_floating_point_ops",
    "disable_timestamptz_casts",
    "scalar_subquery_error_on_multiple_rows",
    "dialect_compatibility_mode",
)
"""Every DuckDB setting recorded with the state, as DuckDB spells it."""

CHOOSABLE = frozenset({"TimeZone", "Calendar"})
"""The settings a new state may be given other values of (``settings=``)."""


class SettingsError(ValueError):
    """A requested setting is unknown, may not be chosen, or has a value DuckDB refuses."""


def current(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The values ``con`` has now of every recorded setting this DuckDB knows."""
    rows = con.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))",
        [list(EVALUATION)],
    ).fetchall()
    return {str(name): "" if value is None else str(value) for name, value in rows}


def canonical(requested: Mapping[str, object]) -> dict[str, str]:
    """``requested`` with DuckDB's spelling of each name (names ignore case);
    SettingsError for a name that is not recorded or may not be chosen."""
    spelled = {name.lower(): name for name in EVALUATION}
    chosen: dict[str, str] = {}
    for name, value in requested.items():
        known = spelled.get(str(name).lower())
        if known is None:
            raise SettingsError(
                f"unknown setting {name!r}: settings= takes "
                f"{', '.join(sorted(CHOOSABLE))}"
            )
        if known not in CHOOSABLE:
            raise SettingsError(
                f"setting {known!r} keeps DuckDB's default: the SQL ivm generates relies on "
                f"it (settings= takes {', '.join(sorted(CHOOSABLE))})"
            )
        if not isinstance(value, str):
            raise SettingsError(f"setting {known!r} takes a string, not {value!r}")
        chosen[known] = value
    return chosen


def settings_sql(settings: Mapping[str, str]) -> str:
    """One script of SET statements giving a connection ``settings``."""
    return "; ".join(
        f"SET {name} = '{value.replace(chr(39), chr(39) * 2)}'"
        for name, value in settings.items()
    )


QUIET_PROGRESS = {"enable_progress_bar": "true", "enable_progress_bar_print": "false"}
"""Given to every connection with its settings: DuckDB keeps counting a statement's
progress (``query_progress()``, which ``views.progress`` draws, labelled, on stderr)
but never prints its own bar, unlabelled, on standard output past two seconds."""


def apply(con: duckdb.DuckDBPyConnection, settings: Mapping[str, str]) -> None:
    """Give ``con`` every one of ``settings`` and ``QUIET_PROGRESS`` (one statement;
    ``TimeZone``, ``Calendar`` and the progress bar's hold per connection, so every
    connection and cursor is given them)."""
    con.execute(settings_sql({**QUIET_PROGRESS, **settings})).fetchall()


def applied(con: duckdb.DuckDBPyConnection, settings: Mapping[str, str]) -> dict[str, str]:
    """Apply ``settings`` to ``con`` and return them as DuckDB reads them back (its own
    spelling of a value); SettingsError if DuckDB refuses one."""
    try:
        apply(con, settings)
    except duckdb.Error as error:
        raise SettingsError(str(error).split("\n", 1)[0]) from None
    now = current(con)
    return {name: now[name] for name in settings if name in now}
