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

from ivm.sql_frontend.exists_select import needless_list


def used_names(parsed: exp.Expression, qualified: exp.Expression) -> frozenset[str] | None:
    """The (lower-case) names ``parsed`` / ``qualified`` mention; None when the query may
    read columns it does not name, or breaks ties by every column of its tables."""
    trees = (parsed, qualified)
    if any(_reads_unnamed(tree) for tree in trees):
        return None
    tables = {t.alias_or_name.lower() for tree in trees for t in tree.find_all(exp.Table)}
    tables |= {t.name.lower() for tree in trees for t in tree.find_all(exp.Table)}
    names = {i.name.lower() for tree in trees for i in tree.find_all(exp.Identifier)}
    # Qualified, a column has its table: one without, named as a table and not as an
    # output of its SELECT (ORDER BY nation), may be the table's whole row as a struct.
    if any(c.name.lower() in tables and not _an_output(c)
           for c in qualified.find_all(exp.Column) if not c.table):
        return None
    return frozenset(names)


def _an_output(column: exp.Column) -> bool:
    """``column`` names an output of the SELECT it is in (an ORDER BY alias)."""
    select = column.find_ancestor(exp.Select)
    return select is not None and column.name.lower() in {
        e.alias_or_name.lower() for e in select.expressions
    }


def _reads_unnamed(tree: exp.Expression) -> bool:
    """``tree`` reads columns without naming them, or orders ties by all of them."""
    for star in tree.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count) and not _tested_by_exists(star):
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


def _tested_by_exists(star: exp.Star) -> bool:
    """``star`` is the SELECT list of an EXISTS subquery whose list cannot matter (the
    ``exists_select_one`` rule makes it ``1``)."""
    select = star.parent
    if not isinstance(select, exp.Select) or star not in select.expressions:
        return False
    parent = select.parent
    while isinstance(parent, exp.Subquery):
        parent = parent.parent
    return isinstance(parent, exp.Exists) and needless_list(select)
