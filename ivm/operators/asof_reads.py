"""What an ASOF join's epoch reads of its right side: a time window per key, not history.

Both queries here take the right side as a weighted trace: a Z-set whose rows of
positive summed weight are the live ones, and which still holds rows inserted and deleted
since its last compaction. Deciding which (key, time) are live would consolidate the
whole history of every touched key (a GROUP BY over all its rows). Neither query needs
that: each needs, per key, the *nearest* live time past some point, and a bound that is
at least as far is enough (it only widens what is recomputed). A (key, time) none of
whose rows has a negative weight is live for certain; the nearest such time is such a
bound. Rows of negative weight are few (the trace's uncompacted deletions and the epoch's
own), so they are found with a filter.

``window_sql``: the right rows that can be the match of a set of left rows. For a key
whose left rows' times span [lo, hi] and a join ``l.t >= r.t`` (or ``>``), every match
lies between the latest certainly-live right time that can match ``lo`` and ``hi``: one
filtered MAX per key, then the key's rows in that range. (Mirrored for ``<=`` and ``<``.)

``neighbours_sql``: for each changed right (key, time), the interval of left times whose
match it can move: from the time to the nearest certainly-live time on the side its
matches lie (after it for ``>=``, ``>``; before it for ``<=``, ``<``), live before or after
the epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ivm.plan.sql import W, column_list
from ivm.schema import quote

if TYPE_CHECKING:
    from ivm.operators.asof_join import AsOfJoin

PAIRWISE_CHANGES = 16
"""A key with at most this many changed right times finds their neighbours by comparing
each with the key's times (a hash join); one with more sorts them once (an ASOF join)."""


def deduplicated_right_sql(node: AsOfJoin, right: str, weighted: bool) -> str:
    """The right rows that can match: non-NULL keys and time, one per key and time (the
    first by the other columns, ascending, NULLs last); ``weighted``: ``right`` is a
    Z-set whose rows of positive weight are the live ones."""
    names = node.right.schema.names
    keys = [b for _, b in node.keys] + [node.right_time]
    others = [n for n in names if n not in keys]
    live = (
        f"SELECT {column_list(names)} FROM ({right}) AS __z GROUP BY ALL HAVING SUM({W}) > 0"
        if weighted
        else right
    )
    order = ", ".join([quote(k) for k in keys] + [f"{quote(o)} ASC NULLS LAST" for o in others])
    present = " AND ".join(f"{quote(k)} IS NOT NULL" for k in keys)
    return (
        f"SELECT DISTINCT ON ({column_list(keys)}) {column_list(names)} FROM ({live}) AS __x "
        f"WHERE {present} ORDER BY {order}"
    )


def _certain(rows: str, negative: str, keys: Sequence[str], time: str) -> str:
    """The rows of ``rows`` (with ``keys`` and ``time``, aliased ``__r``) of positive weight
    whose (keys, time) has no row in ``negative``: live for certain."""
    match = " AND ".join(f"__r.{quote(c)} = __n.{quote(c)}" for c in [*keys, time])
    return f"SELECT * FROM ({rows}) AS __r ANTI JOIN {negative} AS __n ON {match}"


def window_sql(
    right: str,
    rows: str,
    keys: Sequence[tuple[str, str]],
    left_time: str,
    op: str,
    right_time: str,
) -> str:
    """The rows of Z-set ``right`` (with their weights) that can be the match of a row of
    ``rows`` (left rows) under ``keys`` (left, right column pairs) and
    ``left_time op right_time`` (see the module docstring)."""
    lkeys = [a for a, _ in keys]
    rkeys = [b for _, b in keys]
    lt, rt = quote(left_time), quote(right_time)
    before = op in (">=", ">")  # matches lie at or before the left row's time
    present = " AND ".join(f"{quote(c)} IS NOT NULL" for c in [*lkeys, left_time])
    comma = ", " if keys else ""
    bounds = (
        f"SELECT {', '.join(f'{quote(a)} AS {quote(b)}' for a, b in keys)}{comma}"
        f"MIN({lt}) AS __ivm_lo, MAX({lt}) AS __ivm_hi FROM ({rows}) AS __a WHERE {present}"
        + (f" GROUP BY {column_list(lkeys)}" if keys else "")
    )
    on = " AND ".join(f"__r.{quote(k)} = __b.{quote(k)}" for k in rkeys) or "true"
    negative = (
        f"SELECT DISTINCT {column_list([*rkeys, right_time], '__r')} FROM ({right}) AS __r "
        f"JOIN __bounds AS __b ON {on} WHERE __r.{W} < 0"
    )
    edge, nearest = ("__ivm_lo", "MAX") if before else ("__ivm_hi", "MIN")
    reach = (  # the key's rows a left row at the edge can match, of positive weight
        f"SELECT {column_list([*rkeys, right_time], '__r')} FROM ({right}) AS __r "
        f"JOIN __bounds AS __b ON {on} WHERE __b.{edge} {op} __r.{rt} AND __r.{W} > 0"
    )
    edges = (
        f"SELECT {column_list(rkeys)}{comma}{nearest}({rt}) AS __ivm_edge "
        f"FROM ({_certain(reach, '__negative', rkeys, right_time)}) AS __c"
        + (f" GROUP BY {column_list(rkeys)}" if keys else "")
    )
    edge_on = " AND ".join(f"__b.{quote(k)} = __e.{quote(k)}" for k in rkeys) or "true"
    lower, upper = ("__e.__ivm_edge", "__b.__ivm_hi") if before else \
        ("__b.__ivm_lo", "__e.__ivm_edge")
    windows = (
        f"SELECT __b.*, {lower} AS __ivm_from, {upper} AS __ivm_to FROM __bounds AS __b "
        f"LEFT JOIN ({edges}) AS __e ON {edge_on}"
    )
    on_window = " AND ".join(f"__r.{quote(k)} = __w.{quote(k)}" for k in rkeys)
    inside = (
        f"(__w.__ivm_from IS NULL OR __r.{rt} >= __w.__ivm_from) "
        f"AND (__w.__ivm_to IS NULL OR __r.{rt} <= __w.__ivm_to)"
    )
    return (
        f"WITH __bounds AS MATERIALIZED ({bounds}), __negative AS MATERIALIZED ({negative}), "
        f"__windows AS MATERIALIZED ({windows}) "
        f"SELECT __r.* FROM ({right}) AS __r JOIN __windows AS __w "
        f"ON {' AND '.join([on_window, inside]) if keys else inside}"
    )


def neighbours_sql(
    old: str, change: str, keys: Sequence[str], time: str, op: str
) -> str:
    """Per changed (keys, time) of Z-set ``change`` (non-NULL time), the interval
    ``__lo``..``__hi`` of left times whose match it can move: from the time to the nearest
    certainly-live time in ``old`` or ``old`` + ``change`` on the matching side (NULL:
    unbounded)."""
    t = quote(time)
    columns = column_list([*keys, time])
    changed = f"SELECT DISTINCT {columns} FROM ({change}) AS __r WHERE {t} IS NOT NULL"
    if keys:  # only the changed keys' rows are read
        same = " AND ".join(f"__o.{quote(k)} = __k.{quote(k)}" for k in keys)
        old = (
            f"SELECT * FROM ({old}) AS __o SEMI JOIN (SELECT DISTINCT "
            f"{column_list(keys)} FROM ({change}) AS __c) AS __k ON {same}"
        )
    both = f"SELECT {columns}, {W} FROM ({old}) AS __v UNION ALL " \
           f"SELECT {columns}, {W} FROM ({change}) AS __c"
    negative = f"SELECT DISTINCT {columns} FROM __both WHERE {W} < 0"
    live = _certain(f"SELECT {columns} FROM __both WHERE {W} > 0", "__negative", keys, time)
    before = op in (">=", ">")
    comparison = "<" if before else ">"  # the neighbour is after (before) the change
    nearest = "MIN" if before else "MAX"
    same = [f"__c.{quote(k)} = __l.{quote(k)}" for k in keys]
    on = " AND ".join([*same, f"__c.{t} {comparison} __l.{t}"])

    def interval(neighbour: str) -> str:
        lo, hi = (f"__c.{t}", neighbour) if before else (neighbour, f"__c.{t}")
        return f"{column_list(keys, '__c')}{', ' if keys else ''}{lo} AS __lo, {hi} AS __hi"

    pairwise = (
        f"SELECT {interval(f'{nearest}(__l.{t})')} FROM __changed AS __c "
        f"LEFT JOIN __live AS __l ON {on} WHERE __c.__ivm_many = 0 GROUP BY ALL"
    )
    many = "SELECT * FROM __changed WHERE __ivm_many = 1"
    their_keys = " AND ".join(f"__l.{quote(k)} = __m.{quote(k)}" for k in keys) or "true"
    sorted_ = (
        f"SELECT {interval(f'__l.{t}')} FROM ({many}) AS __c ASOF LEFT JOIN "
        f"(SELECT * FROM __live AS __l SEMI JOIN ({many}) AS __m ON {their_keys}) AS __l "
        f"ON {on}"
    )
    partition = f"PARTITION BY {column_list(keys)}" if keys else ""
    return (
        f"WITH __changed AS MATERIALIZED (SELECT *, CASE WHEN COUNT(*) OVER ({partition}) > "
        f"{PAIRWISE_CHANGES} THEN 1 ELSE 0 END AS __ivm_many FROM ({changed}) AS __x), "
        f"__both AS MATERIALIZED ({both}), __negative AS MATERIALIZED ({negative}), "
        f"__live AS MATERIALIZED ({live}) "
        f"SELECT * FROM ({pairwise}) AS __p UNION ALL SELECT * FROM ({sorted_}) AS __s"
    )
