"""The columns of its tables a query can read: the others are left out of its plan.

A table's source in a plan is its columns renamed ``alias.column``; every column the
query never names would still be carried through each join's delta terms, and the SQL
an epoch runs grows with them (TPC-DS q64: eighteen tables, most of whose columns are
never read, made 183k characters for one statement, whose planning cost DuckDB more than
running it). ``used_names`` is the set of names the query mentions anywhere (as parsed
and as qualified, where ``*`` is expanded and USING spelled out): a column of any table
that no name matches cannot be read, so it is dropped where the table enters the plan
(``from_clause.plan_source``). Nothing is dropped where a query may read columns it does
not name: a ``*`` left unexpanded (``count(*)`` aside), ``COLUMNS(…)``, PIVOT / UNPIVOT,
NATURAL joins, a table's whole row by its name (``SELECT t FROM t``), and where ivm's
documented tie-breaking reads every column of the FROM tables (windows, QUALIFY,
DISTINCT ON, ASOF joins), and temporal joins (``FOR SYSTEM_TIME AS OF``: each left row
keeps the version it met on arrival, so rows must stay apart as the table has them).
"""

from __future__ import annotations

from sqlglot import exp


def used_names(parsed: exp.Expression, qualified: exp.Expression) -> frozenset[str] | None:
    """The (lower-case) names ``parsed`` / ``qualified`` mention; None when the query may
    read columns it does not name, or breaks ties by every column of its tables."""
    trees = (parsed, qualified)
    if any(_reads_unnamed(tree) for tree in trees):
        return None
    tables = {t.alias_or_name.lower() for tree in trees for t in tree.find_all(exp.Table)}
    tables |= {t.name.lower() for tree in trees for t in tree.find_all(exp.Table)}
    names = {i.name.lower() for tree in trees for i in tree.find_all(exp.Identifier)}
    columns = {c.name.lower() for tree in trees for c in tree.find_all(exp.Column)}
    if columns & tables:  # a table's whole row as a struct, maybe
        return None
    return frozenset(names)


def _reads_unnamed(tree: exp.Expression) -> bool:
    """``tree`` reads columns without naming them, or orders ties by all of them."""
    for star in tree.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            return True
    if any(True for _ in tree.find_all(exp.Columns, exp.Pivot, exp.Window, exp.Qualify,
                                        exp.Version)):
        return True
    for distinct in tree.find_all(exp.Distinct):
        if distinct.args.get("on") is not None:
            return True
    for join in tree.find_all(exp.Join):
        method = (join.args.get("method") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if {method, kind} & {"ASOF", "NATURAL", "POSITIONAL"}:
            return True
    return False
