"""A seeded generator of random DuckDB queries over a fixed schema (the SQL fuzzer).

``generate(seed)`` returns one query (deterministic per seed): joins of every kind
(inner, left, right, full, cross, semi, anti, ASOF), derived tables, CTEs and recursive
CTEs, EXISTS / IN / ANY / ALL / scalar subqueries (correlated or not), set operations,
grouped SELECTs (FILTER, DISTINCT, HAVING, GROUPING SETS / ROLLUP / CUBE), windows,
DISTINCT, DISTINCT ON, ORDER BY … LIMIT, and expressions with NULLs, decimals and
doubles. Queries are typed as they are built, so most are valid; ``valid_query`` draws
until DuckDB accepts one (the rejects are counted, never run).

The queries avoid what DuckDB itself leaves to chance, since the oracle could not
decide it: every LIMIT, DISTINCT ON and position-dependent window (ROW_NUMBER, LAG…)
orders by every column it could tie on; after an ASOF join only the right side's columns
in its condition are read (tied right rows differ in the others); a value computed from
inexact doubles (AVG, SUM of DOUBLE, VAR…: type ``flt``) appears only in the top SELECT
list, never in a comparison, a key, a set operation or a LIMIT's order (incremental sums round
differently from a recomputation). No division, no cast that can fail.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import duckdb

TABLES: dict[str, list[tuple[str, str]]] = {
    "t1": [("k", "int"), ("a", "int"), ("b", "int"), ("s", "str"), ("x", "dbl"), ("d", "dec")],
    "t2": [("k", "int"), ("a", "int"), ("s", "str"), ("x", "dbl"), ("ts", "ts")],
    "t3": [("a", "int"), ("b", "int"), ("s", "str"), ("d", "dec"), ("f", "bool")],
}
DDL = [
    "CREATE TABLE t1 (k INTEGER PRIMARY KEY, a INTEGER, b INTEGER, s VARCHAR, x DOUBLE, "
    "d DECIMAL(10,2))",
    "CREATE TABLE t2 (k INTEGER, a INTEGER, s VARCHAR, x DOUBLE, ts TIMESTAMP)",
    "CREATE TABLE t3 (a INTEGER, b INTEGER, s VARCHAR, d DECIMAL(10,2), f BOOLEAN)",
]
"""The fixed schema: t1 has a key, t2 and t3 hold duplicates; every other column is
nullable (the harness puts NULL in each)."""

EXACT = ("int", "dec", "dbl", "str", "bool", "ts")
NUMERIC = ("int", "dec", "dbl")
SQL_TYPE = {"int": "INTEGER", "dec": "DECIMAL(10,2)", "dbl": "DOUBLE", "str": "VARCHAR",
            "bool": "BOOLEAN", "ts": "TIMESTAMP"}
LITERALS = {
    "int": ["0", "1", "2", "3", "5", "-1"],
    "dec": ["1.50", "0.01", "2.25", "-3.10"],
    "dbl": ["0.5::DOUBLE", "1.5::DOUBLE", "-2.25::DOUBLE", "0.1::DOUBLE"],
    "str": ["'a'", "'b'", "'A'", "''", "'c'"],
    "bool": ["TRUE", "FALSE"],
    "ts": ["TIMESTAMP '2024-01-01 13:45:10'", "TIMESTAMP '2024-02-29 23:59:59'"],
}


@dataclass(frozen=True)
class Col:
    ref: str
    """How to name it in SQL (``q1.a``)."""
    type: str


@dataclass
class Select:
    sql: str
    types: list[str]
    ordered: bool = False
    """Carries ORDER BY … LIMIT (a set operation parenthesizes it)."""


def family(t: str) -> str:
    return "num" if t in NUMERIC else t


@dataclass
class Generator:
    """Draws one query from ``rng``; ``budget`` bounds its size."""

    rng: random.Random
    budget: int = 60
    aliases: int = 0
    ctes: dict[str, list[str]] = field(default_factory=dict)

    # -- helpers --------------------------------------------------------------------------

    def p(self, chance: float) -> bool:
        return self.rng.random() < chance

    def pick(self, items):  # noqa: ANN001, ANN201 - any sequence
        return self.rng.choice(list(items))

    def alias(self) -> str:
        self.aliases += 1
        return f"q{self.aliases}"

    def spend(self, n: int = 1) -> bool:
        """Whether there is budget left for a compound node (and spend it)."""
        self.budget -= n
        return self.budget > 0

    # -- expressions ----------------------------------------------------------------------

    def literal(self, t: str, null: float = 0.08) -> str:
        if t == "flt":
            t = "dbl"
        if self.p(null):
            return f"CAST(NULL AS {SQL_TYPE[t]})"
        return self.pick(LITERALS[t])

    def column(self, scope: list[Col], t: str) -> str | None:
        cols = [c.ref for c in scope if c.type == t]
        return self.pick(cols) if cols else None

    def expr(self, scope: list[Col], t: str, depth: int = 0, outer: list[Col] = ()) -> str:
        """A row-level expression of type ``t`` over ``scope``."""
        if t == "flt":
            t = "dbl"
        if t == "bool":
            return self.pred(scope, depth, outer=outer)
        col = self.column(scope, t)
        if depth >= 2 or not self.spend() or self.p(0.45):
            return col if col and self.p(0.85) else self.literal(t)
        sub = depth + 1
        choice = self.rng.random()
        if choice < 0.15:
            return (f"CASE WHEN {self.pred(scope, sub)} THEN {self.expr(scope, t, sub)} "
                    f"ELSE {self.expr(scope, t, sub)} END")
        if choice < 0.3:
            return f"COALESCE({self.expr(scope, t, sub)}, {self.literal(t)})"
        if choice < 0.36 and depth == 0 and outer is not None and self.budget > 20:
            return self.scalar_subquery(scope, t)
        if t == "int":
            return self.pick([
                f"({self.expr(scope, 'int', sub)} + {self.expr(scope, 'int', sub)})",
                f"({self.expr(scope, 'int', sub)} - {self.expr(scope, 'int', sub)})",
                f"({self.expr(scope, 'int', sub)} * {self.literal('int')})",
                f"abs({self.expr(scope, 'int', sub)})",
                f"length({self.expr(scope, 'str', sub)})",
                f"({self.expr(scope, 'int', sub)} % 3)",
                f"greatest({self.expr(scope, 'int', sub)}, {self.expr(scope, 'int', sub)})",
                f"CAST({self.expr(scope, 'dec', sub)} AS INTEGER)",
            ])
        if t == "dec":
            return self.pick([
                f"({self.expr(scope, 'dec', sub)} + {self.expr(scope, 'dec', sub)})",
                f"({self.expr(scope, 'dec', sub)} * 2)",
                f"CAST({self.expr(scope, 'int', sub)} AS DECIMAL(10,2))",
                f"round({self.expr(scope, 'dec', sub)}, 1)",
            ])
        if t == "dbl":
            return self.pick([
                f"({self.expr(scope, 'dbl', sub)} + {self.expr(scope, 'dbl', sub)})",
                f"({self.expr(scope, 'dbl', sub)} * 2)",
                f"CAST({self.expr(scope, 'int', sub)} AS DOUBLE)",
            ])
        if t == "str":
            return self.pick([
                f"upper({self.expr(scope, 'str', sub)})",
                f"lower({self.expr(scope, 'str', sub)})",
                f"({self.expr(scope, 'str', sub)} || {self.expr(scope, 'str', sub)})",
                f"CAST({self.expr(scope, 'int', sub)} AS VARCHAR)",
                f"substr({self.expr(scope, 'str', sub)}, 1, 1)",
            ])
        return self.pick([  # ts
            f"({self.expr(scope, 'ts', sub)} + INTERVAL 1 DAY)",
            f"date_trunc('month', {self.expr(scope, 'ts', sub)})",
        ])

    def pred(self, scope: list[Col], depth: int = 0, outer: list[Col] | None = ()) -> str:
        """A boolean over ``scope`` (subqueries may read ``outer`` too, when not None)."""
        choice = self.rng.random()
        if depth < 2 and self.spend() and choice < 0.25:
            op = self.pick(["AND", "OR"])
            left = self.pred(scope, depth + 1, outer)
            text = f"({left} {op} {self.pred(scope, depth + 1, outer)})"
            return f"(NOT {text})" if self.p(0.1) else text
        if (outer is not None and depth < 2 and self.budget > 25 and choice < 0.4):
            return self.subquery_pred(scope)
        t = self.pick(["int", "int", "int", "str", "dec", "dbl", "ts", "bool"])
        if scope and self.p(0.7):
            t = self.pick(scope).type
        if t == "bool":
            col = self.column(scope, "bool")
            if col:
                return self.pick([col, f"(NOT {col})", f"{col} IS NULL"])
            t = "int"
        left = self.expr(scope, t, depth + 1)
        if not any(c.ref in left for c in scope) and (col := self.column(scope, t)):
            left = col  # a comparison of constants filters everything or nothing
        kind = self.rng.random()
        if kind < 0.12:
            return f"{left} IS {self.pick(['', 'NOT '])}NULL"
        if kind < 0.2:
            right = self.expr(scope, t, 1)
            right = self.literal(t, null=0.3) if right == left else right
            return f"{left} IS {self.pick(['', 'NOT '])}DISTINCT FROM {right}"
        if kind < 0.3:
            items = ", ".join(self.literal(t) for _ in range(self.rng.randint(1, 3)))
            return f"{left} {self.pick(['', 'NOT '])}IN ({items})"
        if kind < 0.36 and t != "ts":
            return f"{left} BETWEEN {self.literal(t)} AND {self.literal(t)}"
        if kind < 0.42 and t == "str":
            pattern = self.pick(["'a%'", "'%b'", "'_'", "''"])
            return f"{left} LIKE {pattern}"
        rt = self.pick(NUMERIC) if t in NUMERIC and self.p(0.3) else t
        op = self.pick(["=", "<>", "<", "<=", ">", ">="])
        right = self.literal(rt, 0.02) if self.p(0.5) else self.expr(scope, rt, depth + 1)
        if right == left:  # x > x: never true
            right = self.literal(rt, 0.02)
        return f"{left} {op} {right}"

    # -- subqueries -----------------------------------------------------------------------

    def correlation(self, inner: list[Col], outer: list[Col]) -> str | None:
        """An equality between an inner and an outer column of one family."""
        pairs = [(i, o) for i in inner for o in outer
                 if family(i.type) == family(o.type) and i.type not in ("bool", "flt")]
        same = [(i, o) for i, o in pairs if i.type == o.type]
        if same and self.p(0.85):
            pairs = same  # DECIMAL = INTEGER rarely matches on the harness's values
        if not pairs:
            return None
        i, o = self.pick(pairs)
        return f"{i.ref} = {o.ref}"

    def sub_from(self, outer: list[Col]) -> tuple[str, list[Col], str]:
        """FROM and WHERE of a subquery, maybe correlated with ``outer``."""
        self.spend(8)
        from_sql, scope = self.from_clause(2, max_items=2)
        conds = []
        if outer and self.p(0.6) and (corr := self.correlation(scope, outer)):
            conds.append(corr)
        if self.p(0.5):
            conds.append(self.pred(scope + (outer if self.p(0.3) else []), 1, outer=None))
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return from_sql, scope, where

    def subquery_pred(self, outer: list[Col]) -> str:
        from_sql, scope, where = self.sub_from(outer)
        kind = self.rng.random()
        if kind < 0.35:
            neg = self.pick(["", "NOT "])
            return f"{neg}EXISTS (SELECT 1 FROM {from_sql}{where})"
        t = self.pick(["int", "int", "str", "dec"])
        inner = self.expr(scope, t, 1, outer=None)
        left = self.expr(outer, t, 1)
        if kind < 0.7:
            return f"{left} {self.pick(['', 'NOT '])}IN (SELECT {inner} FROM {from_sql}{where})"
        op = self.pick(["=", "<>", "<", ">=", ">"])
        quant = self.pick(["ANY", "ALL"])
        return f"{left} {op} {quant} (SELECT {inner} FROM {from_sql}{where})"

    def scalar_subquery(self, outer: list[Col], t: str) -> str:
        from_sql, scope, where = self.sub_from(outer)
        return f"(SELECT {self.aggregate(scope, t)} FROM {from_sql}{where})"

    # -- FROM -----------------------------------------------------------------------------

    def table_ref(self, depth: int) -> tuple[str, list[Col]]:
        alias = self.alias()
        roll = self.rng.random()
        if self.ctes and roll < 0.3:
            name = self.pick(self.ctes)
            return f"{name} AS {alias}", [Col(f"{alias}.c{i}", t)
                                          for i, t in enumerate(self.ctes[name])]
        if depth < 2 and roll < 0.45 and self.spend(10):
            sub = self.query(depth + 1)
            return f"({sub.sql}) AS {alias}", [Col(f"{alias}.c{i}", t)
                                               for i, t in enumerate(sub.types)]
        if roll < 0.5:
            types = [self.pick(["int", "str", "dec"]) for _ in range(self.rng.randint(1, 2))]
            rows = ", ".join("(" + ", ".join(self.literal(t) for t in types) + ")"
                             for _ in range(self.rng.randint(1, 3)))
            names = ", ".join(f"c{i}" for i in range(len(types)))
            return f"(VALUES {rows}) AS {alias}({names})", [Col(f"{alias}.c{i}", t)
                                                           for i, t in enumerate(types)]
        table = self.pick(TABLES)
        return f"{table} AS {alias}", [Col(f"{alias}.{n}", t) for n, t in TABLES[table]]

    def join_condition(self, left: list[Col], right: list[Col]) -> str:
        conds = []
        if corr := self.correlation(right, left):
            if self.p(0.15):
                corr = corr.replace(" = ", " IS NOT DISTINCT FROM ")
            conds.append(corr)
        if not conds or self.p(0.3):
            conds.append(self.pred(left + right, 1, outer=None))
        return " AND ".join(conds)

    def from_clause(self, depth: int, max_items: int = 3) -> tuple[str, list[Col]]:
        sql, scope = self.table_ref(depth)
        for _ in range(self.rng.choice([0, 0, 1, 1, 1, 2, 2][: max_items * 3])):
            if not self.spend(3):
                break
            kind = self.pick(["JOIN", "JOIN", "LEFT JOIN", "LEFT JOIN", "RIGHT JOIN",
                              "FULL JOIN", "CROSS JOIN", "SEMI JOIN", "ANTI JOIN", "ASOF"])
            rsql, rscope = self.table_ref(depth)
            if kind == "CROSS JOIN":
                sql += f" CROSS JOIN {rsql}"
            elif kind == "ASOF":
                pairs = [(a, b) for a in scope for b in rscope
                         if a.type == b.type and a.type in ("int", "ts")]
                if not pairs:
                    kind = "JOIN"
                else:
                    a, b = self.pick(pairs)
                    cond = f"{a.ref} {self.pick(['>=', '>', '<=', '<'])} {b.ref}"
                    if corr := self.correlation(rscope, scope):
                        cond = f"{corr} AND {cond}"
                    sql += f" ASOF {self.pick(['', 'LEFT '])}JOIN {rsql} ON {cond}"
                    # Of several right rows at the nearest time DuckDB takes any one: only
                    # the columns the condition equates or compares are the same in all.
                    rscope = [c for c in rscope if re.search(rf"{re.escape(c.ref)}\b", cond)]
            if kind not in ("CROSS JOIN", "ASOF"):
                sql += f" {kind} {rsql} ON {self.join_condition(scope, rscope)}"
            if kind not in ("SEMI JOIN", "ANTI JOIN"):
                scope = scope + rscope
        return sql, scope

    # -- SELECT ---------------------------------------------------------------------------

    def aggregate(self, scope: list[Col], t: str) -> str:
        """An aggregate call of type ``t`` (``flt``: inexact) over ``scope``."""
        col = self.column(scope, t)
        options: list[str] = []
        if t == "int":
            arg = self.expr(scope, "int", 1)
            options += ["COUNT(*)", f"COUNT({arg})", f"SUM({arg})", f"MIN({arg})",
                        f"MAX({arg})", f"COUNT(DISTINCT {arg})", f"SUM(DISTINCT {arg})"]
            options.append(f"COUNT({self.expr(scope, self.pick(EXACT), 1)})")
        elif t == "dec":
            arg = self.expr(scope, "dec", 1)
            options += [f"SUM({arg})", f"MIN({arg})", f"MAX({arg})"]
        elif t == "dbl":
            options += [f"MIN({self.expr(scope, 'dbl', 1)})", f"MAX({col or '0.5::DOUBLE'})"]
        elif t == "str":
            arg = self.expr(scope, "str", 1)
            options += [f"MIN({arg})", f"MAX({arg})", f"MAX(DISTINCT {arg})"]
            if col:
                options.append(f"string_agg({col}, ',' ORDER BY {col})")
        elif t == "bool":
            pred = self.pred(scope, 1, outer=None)
            options += [f"bool_and({pred})", f"bool_or({pred})"]
        elif t == "ts":
            arg = self.expr(scope, "ts", 1)
            options += [f"MIN({arg})", f"MAX({arg})"]
        else:  # flt
            num = self.expr(scope, self.pick(NUMERIC), 1)
            options += [f"AVG({num})", f"SUM({self.expr(scope, 'dbl', 1)})",
                        f"stddev_samp({self.expr(scope, 'int', 1)})",
                        f"var_pop({self.expr(scope, 'dec', 1)})",
                        f"median({self.expr(scope, 'int', 1)})"]
        call = self.pick(options)
        if self.p(0.15):
            call += f" FILTER (WHERE {self.pred(scope, 1, outer=None)})"
        return call

    def select(self, depth: int, want: list[str] | None = None, top: bool = False) -> Select:
        from_sql, scope = self.from_clause(depth)
        where = f" WHERE {self.pred(scope, 0)}" if self.p(0.4) else ""
        types = want or [self.scope_type(scope, top) for _ in range(self.rng.randint(1, 3))]
        mode = self.pick(["plain", "plain", "grouped", "grouped", "window", "distinct",
                          "distinct_on"])
        if mode == "grouped":
            return self.grouped(from_sql, scope, where, types, depth, top)
        items = [self.expr(scope, t) for t in types]
        if mode == "window" and not want:
            calls, wtypes = self.windows(scope)
            items += calls
            types = types + wtypes
        cols = ", ".join(f"{e} AS c{i}" for i, e in enumerate(items))
        head = "SELECT "
        order = ""
        if mode == "distinct":
            head = "SELECT DISTINCT "
        elif mode == "distinct_on" and "flt" not in types:
            head = "SELECT DISTINCT ON (c0) "
            order = " ORDER BY " + ", ".join(self.direction(f"c{i}") for i in range(len(items)))
        sql = f"{head}{cols} FROM {from_sql}{where}{order}"
        return self.limited(Select(sql, types, bool(order)), top)

    def scope_type(self, scope: list[Col], top: bool) -> str:
        """A type for an output column: mostly one the FROM has a column of."""
        if top and self.p(0.15):
            return "flt"
        if scope and self.p(0.8):
            return self.pick(scope).type
        return self.pick(EXACT)

    def direction(self, term: str) -> str:
        return f"{term} {self.pick(['ASC', 'DESC'])} {self.pick(['NULLS FIRST', 'NULLS LAST'])}"

    def limited(self, sel: Select, top: bool) -> Select:
        """Maybe ORDER BY every output column … LIMIT n [OFFSET m]."""
        if sel.ordered or "flt" in sel.types or not self.p(0.15):
            return sel
        order = ", ".join(self.direction(str(i + 1)) for i in range(len(sel.types)))
        offset = f" OFFSET {self.rng.randint(1, 2)}" if self.p(0.3) else ""
        return Select(f"{sel.sql} ORDER BY {order} LIMIT {self.rng.randint(1, 4)}{offset}",
                      sel.types, True)

    def grouped(self, from_sql: str, scope: list[Col], where: str, types: list[str],
                depth: int, top: bool) -> Select:
        keys = [self.expr(scope, self.pick(EXACT), 1) for _ in range(self.rng.randint(0, 2))]
        keys = list(dict.fromkeys(k for k in keys if any(c.ref in k for c in scope)))
        key_types = []
        items = []
        for t in types:
            matching = [k for k in keys if self._type_of(k, scope) == t]
            if matching and self.p(0.5):
                items.append(self.pick(matching))
            else:
                items.append(self.aggregate(scope, t))
            key_types.append(t)
        group = ""
        if keys:
            roll = self.rng.random()
            if roll < 0.15 and len(keys) == 2:
                k1, k2 = keys
                group = " GROUP BY " + self.pick([
                    f"GROUPING SETS (({k1}, {k2}), ({k1}), ())", f"ROLLUP ({k1}, {k2})",
                    f"CUBE ({k1}, {k2})"])
            elif roll < 0.25:
                group = " GROUP BY ALL"
            else:
                group = " GROUP BY " + ", ".join(keys)
        having = ""
        if self.p(0.3):
            t = self.pick(["int", "dec", "str"])
            bound = {"int": "> 1", "dec": ">= 1.50", "str": "<> 'a'"}[t]
            having = f" HAVING {self.aggregate(scope, t)} {bound}"
        cols = ", ".join(f"{e} AS c{i}" for i, e in enumerate(items))
        return self.limited(Select(f"SELECT {cols} FROM {from_sql}{where}{group}{having}",
                                   key_types), top)

    @staticmethod
    def _type_of(expr: str, scope: list[Col]) -> str | None:
        return next((c.type for c in scope if c.ref == expr), None)

    def windows(self, scope: list[Col]) -> tuple[list[str], list[str]]:
        """One or two window calls over the SELECT's rows. At most one of them depends on
        row positions (ROW_NUMBER, NTILE, LAG, LEAD, a ROWS frame): over identical rows,
        which copy gets which value is DuckDB's arbitrary choice, so two such calls over
        different windows pair their values arbitrarily (one alone permutes copies)."""
        calls, types = [], []
        positional = False
        exact = [c for c in scope if c.type in EXACT and c.type != "bool"]
        if not exact:
            return ["COUNT(*) OVER ()"], ["int"]
        for _ in range(self.rng.randint(1, 2)):
            part = ""
            if exact and self.p(0.7):
                part = f"PARTITION BY {self.pick(exact).ref}"
            key = self.pick(exact).ref if exact else "1"
            total = ", ".join(self.direction(c.ref) for c in scope if c.type != "flt")
            kind = self.rng.random()
            if positional and (0.3 <= kind < 0.55 or kind >= 0.8):
                kind = 0.6  # an aggregate over a RANGE frame instead
            positional = positional or 0.3 <= kind < 0.55 or kind >= 0.8
            if kind < 0.3:
                fn = self.pick(["rank()", "dense_rank()"])
                calls.append(f"{fn} OVER ({part} ORDER BY {self.direction(key)})")
                types.append("int")
            elif kind < 0.55:
                fn = self.pick(["row_number()", "ntile(2)", f"lag({key})", f"lead({key}, 1)"])
                calls.append(f"{fn} OVER ({part} ORDER BY {total})")
                shifted = fn.startswith(("lag", "lead"))
                types.append(self._type_of(key, scope) or "int" if shifted else "int")
            elif kind < 0.8:
                arg = self.pick(exact).ref if exact else "1"
                t = self._type_of(arg, scope) or "int"
                fn = self.pick([f"MIN({arg})", f"MAX({arg})", f"COUNT({arg})"])
                order = f" ORDER BY {self.direction(key)}" if self.p(0.5) else ""
                calls.append(f"{fn} OVER ({part}{order})")
                types.append("int" if fn.startswith("COUNT") else t)
            else:
                ints = [c.ref for c in scope if c.type == "int"] or ["1"]
                frame = self.pick(["ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
                                   "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING"])
                calls.append(f"SUM({self.pick(ints)}) OVER ({part} ORDER BY {total} {frame})")
                types.append("int")
        return calls, types

    # -- queries --------------------------------------------------------------------------

    def query(self, depth: int, top: bool = False) -> Select:
        """A SELECT or a set operation of SELECTs (typed, columns c0, c1, …)."""
        first = self.select(depth, top=top)
        if self.p(0.2) and "flt" not in first.types and self.spend(10):
            op = self.pick(["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT",
                            "EXCEPT ALL"])
            second = self.select(depth, want=first.types)
            sql = f"({first.sql}) {op} ({second.sql})"
            return self.limited(Select(sql, first.types), top)
        return first

    def with_clause(self) -> str:
        parts = []
        recursive = False
        for _ in range(self.rng.choice([0, 0, 0, 1, 1, 2])):
            name = f"w{len(self.ctes) + 1}"
            if self.p(0.25):
                recursive = True
                body, types = self.recursive_cte(name)
            else:
                sel = self.query(1)
                body, types = sel.sql, sel.types
            parts.append(f"{name}({', '.join(f'c{i}' for i in range(len(types)))}) AS "
                         f"({body})")
            self.ctes[name] = types
        if not parts:
            return ""
        return ("WITH RECURSIVE " if recursive else "WITH ") + ", ".join(parts) + " "

    def recursive_cte(self, name: str) -> tuple[str, list[str]]:
        """A recursive CTE that terminates on any data (bounded counters, finite domains)."""
        template = self.rng.randint(0, 2)
        if template == 0:
            return (f"SELECT a, s FROM t3 WHERE a IS NOT NULL UNION SELECT c0 + 1, c1 "
                    f"FROM {name} WHERE c0 < 6", ["int", "str"])
        if template == 1:
            return (f"SELECT a, b FROM t3 UNION SELECT r.c0, e.b FROM {name} AS r "
                    f"JOIN t3 AS e ON r.c1 = e.a", ["int", "int"])
        return (f"SELECT k, 0 FROM t1 UNION ALL SELECT c0, c1 + 1 FROM {name} "
                f"WHERE c1 < 2", ["int", "int"])

    def top(self) -> str:
        ctes = self.with_clause()
        return ctes + self.query(0, top=True).sql


def generate(seed: int) -> str:
    """The query of ``seed`` (not validated)."""
    rng = random.Random(seed)
    return Generator(rng, budget=rng.choice([15, 30, 50])).top()


def valid_query(seed: int, check: duckdb.DuckDBPyConnection) -> tuple[str, int]:
    """The first query DuckDB accepts among those drawn from ``seed`` (``check``: a
    connection holding the schema), and how many were rejected before it."""
    rng = random.Random(seed)
    rejected = 0
    while True:
        sql = Generator(rng, budget=rng.choice([15, 30, 50])).top()
        try:
            check.execute(f"EXPLAIN {sql}")
            return sql, rejected
        except duckdb.Error:
            rejected += 1


def schema_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding the fuzzer's (empty) tables."""
    con = duckdb.connect()
    for statement in DDL:
        con.execute(statement)
    return con
