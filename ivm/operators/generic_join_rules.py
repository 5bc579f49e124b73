"""The delta rules of ``GenericJoin`` for one epoch: count, propose, validate, as SQL.

A rule's computation (``RuleRun.steps``) is a generator: it yields the reads it needs
next (``Read``: an input's rows at some keys, or a count trace at some prefixes) and
is sent back the SQL of each; between reads it runs its statements. The operator
drives every rule's generator in lockstep and serves all the reads one round asks for
together, one lookup per arrangement (the three roles of a self-joined table read
its arrangement by ``src`` once for all the rules, not once per rule).

A *prefix relation* has a column ``__a<b>`` per bound attribute b and, per input
already *covered* (all its columns are attributes, every one bound, its rows' summed
weight there found while proposing or validating), that weight as ``__m<j>``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ivm.operators.base import At, Run
from ivm.operators.join_hypergraph import Extension, Rule
from ivm.operators.reads import read_sql
from ivm.plan.sql import W, column_list, sql_of, union_all_sql
from ivm.schema import quote

if TYPE_CHECKING:
    from ivm.operators.generic_join import GenericJoin


def attr(a: int) -> str:
    """Column name of attribute ``a`` in a prefix relation."""
    return f"__a{a}"


def attr_list(attributes: Sequence[int]) -> str:
    """The prefix relation's columns of ``attributes``, comma-separated."""
    return ", ".join(attr(a) for a in attributes)


@dataclass(frozen=True)
class Read:
    """A read a rule asks for: input ``input``'s rows (its integral before the epoch)
    whose ``key`` attributes' columns equal a row of ``keys``; with ``count``, that
    input's count trace by ``key`` instead (``k0..``, ``__w``: rows per prefix, live)."""

    input: int
    key: tuple[int, ...]
    keys: str
    count: bool = False


Reads = Generator[list[Read], list[str], str | None]
"""A rule's computation: yields reads, is sent their SQL, returns its term (or None)."""


class RuleRun:
    """One delta rule computed for one epoch (see the module docstring)."""

    def __init__(
        self, op: GenericJoin, run: Run, rule: Rule, deltas: Sequence[str | None]
    ) -> None:
        self.op, self.run, self.rule, self.deltas = op, run, rule, deltas
        self.shape = op.shape
        self.covered: list[int] = []

    def steps(self) -> Reads:
        """The rule's term: yields the reads it needs; returns its SQL, or None when no
        prefix survives."""
        i = self.rule.changed
        delta = self.deltas[i]
        assert delta is not None
        mine = self.shape.columns_of(i)
        select = ", ".join(f"{quote(mine[a])} AS {attr(a)}" for a in self.rule.bound)
        not_null = " AND ".join(f"{quote(mine[a])} IS NOT NULL" for a in self.rule.bound)
        prefixes = f"SELECT DISTINCT {select} FROM ({delta}) AS __d WHERE {not_null}"
        bound = list(self.rule.bound)
        steps = self.rule.steps
        for s, step in enumerate(steps):
            prefixes = yield from self._extend(s, step, prefixes, bound)
            bound.append(step.attribute)
            if self.run.is_empty(prefixes):  # no candidate: nothing to validate
                return None
            if s < len(steps) - 1 or len(self.covered) < len(self.op.inputs) - 1:
                prefixes = self.run.materialize(self.op, f"r{i}s{s}", prefixes)
                if self.run.is_empty(prefixes):
                    return None
        return (yield from self._rows_joined(prefixes, bound))

    # -- reads at a version ------------------------------------------------------------------

    def _new(self, j: int) -> bool:
        return j < self.rule.changed and self.deltas[j] is not None

    def _read(self, j: int, attributes: Sequence[int], source: str, where: str = "",
              count: bool = False) -> Read:
        """The read of input ``j`` (or its count trace) at the values of ``attributes`` in
        the prefix relation ``source`` (``where``: a condition on its rows)."""
        key = self.op.key_of(j, attributes)
        keys = f"SELECT DISTINCT {attr_list(key)} FROM ({source}) AS __k {where}"
        return Read(j, key, keys, count)

    def _versioned(self, read: Read, old: str) -> str:
        """Input ``read.input``'s rows at the read's keys at the version this rule reads it:
        ``old`` (the read's answer), with the epoch's change too for an input before its own."""
        j = read.input
        if not self._new(j):
            return old
        delta = self.deltas[j]
        assert delta is not None
        columns = tuple(self.shape.columns_of(j)[a] for a in read.key)
        if read.count:
            names = tuple(self.op.counts[(j, read.key)].schema.names)
            at_change = read_sql(projected(delta, columns, names), names,
                                 _at(names, read.keys))
        else:
            at_change = read_sql(delta, self.op.inputs[j].schema.names, _at(columns, read.keys))
        return union_all_sql([old, at_change])

    # -- one extension -----------------------------------------------------------------------

    def _covers(self, j: int, prefix: tuple[int, ...], a: int) -> bool:
        """True when binding ``a`` after ``prefix`` binds every column of input ``j``."""
        return self.op.attribute_only[j] and set(self.shape.columns_of(j)) == {*prefix, a}

    def _extend(self, s: int, step: Extension, prefixes: str, bound: list[int]) -> Reads:
        """SQL of the prefix relation extended by ``step``'s attribute."""
        i, a = self.rule.changed, step.attribute
        kept = [attr(b) for b in bound] + [f"__m{j}" for j in self.covered]
        carried = ", ".join(f"__p.{c}" for c in kept)
        parts = step.participants
        if len(parts) == 1:
            j, prefix = parts[0]
            read = self._read(j, prefix, prefixes)
            (rows,) = yield [read]
            proposed = self._proposed(j, prefix, a, prefixes, self._versioned(read, rows),
                                      carried, "")
            if self._covers(j, prefix, a):
                self.covered.append(j)
                return proposed.replace(" AS __mp ", f" AS __m{j} ", 1)
            return proposed
        # Count: each participant's rows per prefix; the fewest proposes.
        reads = [self._read(j, p, prefixes, count=True) for j, p in parts]
        counts = yield reads
        joins = []
        for k, ((j, _), read, sql) in enumerate(zip(parts, reads, counts, strict=True)):
            names = column_list(self.op.counts[(j, read.key)].schema.names)
            on = " AND ".join(f"__c{k}.k{m} = __p.{attr(b)}" for m, b in enumerate(read.key))
            joins.append(f"JOIN (SELECT {names}, SUM({W}) AS __n FROM "
                         f"({self._versioned(read, sql)}) AS __r GROUP BY {names}) AS __c{k} "
                         f"ON {on}")
        scored = self.run.materialize(
            self.op, f"r{i}s{s}c",
            f"SELECT {carried}, {_argmin([f'__c{k}.__n' for k in range(len(parts))])} AS __win "
            f"FROM ({prefixes}) AS __p {' '.join(joins)}",
        )
        if self.run.is_empty(scored):
            return scored
        # Propose: each prefix's values from its proposer.
        reads = [self._read(j, p, scored, f"WHERE __win = {k}")
                 for k, (j, p) in enumerate(parts)]
        rows = yield reads
        # Materialized: the validators look up its (prefix, value) pairs, and a read's
        # SQL repeats its keys' SQL (nesting the proposals' would grow the text).
        candidates = self.run.materialize(self.op, f"r{i}s{s}x", union_all_sql([
            self._proposed(j, p, a, scored, self._versioned(read, sql),
                           f"{carried}, __p.__win", f"AND __p.__win = {k}")
            for k, ((j, p), read, sql) in enumerate(zip(parts, reads, rows, strict=True))
        ]))
        if self.run.is_empty(candidates):
            return candidates
        # Validate: every other participant holds (prefix, value).
        reads = [self._read(j, (*p, a), candidates, f"WHERE __win <> {k}")
                 for k, (j, p) in enumerate(parts)]
        rows = yield reads
        joins, checks, weights = [], [], []
        for k, ((j, prefix), read, sql) in enumerate(zip(parts, reads, rows, strict=True)):
            columns = [self.shape.columns_of(j)[b] for b in read.key]
            match = " AND ".join(f"__v{k}.{quote(c)} = __x.{attr(b)}"
                                 for c, b in zip(columns, read.key, strict=True))
            joins.append(
                f"LEFT JOIN (SELECT {column_list(columns)}, SUM({W}) AS __s FROM "
                f"({self._versioned(read, sql)}) AS __v GROUP BY ALL HAVING SUM({W}) > 0) "
                f"AS __v{k} ON {match}"
            )
            checks.append(f"(__x.__win = {k} OR __v{k}.__s IS NOT NULL)")
            if self._covers(j, prefix, a):
                weights.append(f"CASE WHEN __x.__win = {k} THEN __x.__mp ELSE __v{k}.__s END "
                               f"AS __m{j}")
        self.covered.extend(j for j, p in parts if self._covers(j, p, a))
        select = ", ".join([*(f"__x.{c}" for c in kept), f"__x.{attr(a)}", *weights])
        return (f"SELECT {select} FROM ({candidates}) AS __x {' '.join(joins)} "
                f"WHERE {' AND '.join(checks)}")

    def _proposed(
        self, j: int, prefix: tuple[int, ...], a: int, prefixes: str, rows: str, carried: str,
        where: str,
    ) -> str:
        """SQL: each prefix of ``prefixes`` (``where`` picks them) with every value of
        attribute ``a`` in input ``j``'s ``rows`` at it (live rows only), and their summed
        weight ``__mp``."""
        mine = self.shape.columns_of(j)
        on = " AND ".join(f"__r.{quote(mine[b])} = __p.{attr(b)}" for b in prefix)
        value = f"__r.{quote(mine[a])}"
        return (
            f"SELECT {carried}, {value} AS {attr(a)}, SUM(__r.{W}) AS __mp "
            f"FROM ({prefixes}) AS __p JOIN ({rows}) AS __r ON {on} "
            f"WHERE {value} IS NOT NULL {where} GROUP BY ALL HAVING SUM(__r.{W}) > 0"
        )

    # -- the rows ----------------------------------------------------------------------------

    def _rows_joined(self, prefixes: str, bound: list[int]) -> Reads:
        """SQL of the rule's term: every input's rows at the bound prefixes, joined (a
        covered input's from the prefix relation itself)."""
        i = self.rule.changed
        others = [j for j in range(len(self.op.inputs)) if j != i and j not in self.covered]
        reads = [self._read(j, [b for b in bound if b in self.shape.columns_of(j)], prefixes)
                 for j in others]
        answers = dict(zip(others, (yield reads) if reads else [], strict=True))
        sources = [f"({prefixes}) AS __p"]
        weights, selects = [], []
        for j, op in enumerate(self.op.inputs):
            mine = self.shape.columns_of(j)
            if j in self.covered:
                attribute_of = {c: b for b, c in mine.items()}
                selects += [f"__p.{attr(attribute_of[c])} AS {quote(c)}" for c in op.schema.names]
                weights.append(f"__p.__m{j}")
                continue
            attributes = [b for b in bound if b in mine]
            rows = (self.deltas[i] if j == i
                    else self._versioned(reads[others.index(j)], answers[j]))
            on = " AND ".join(f"__r{j}.{quote(mine[b])} = __p.{attr(b)}" for b in attributes)
            sources.append(f"JOIN ({rows}) AS __r{j} ON {on}")
            weights.append(f"__r{j}.{W}")
            if op.schema.names:
                selects.append(column_list(op.schema.names, f"__r{j}"))
        residual = self.shape.residual
        where = f" WHERE {' AND '.join(sql_of(c) for c in residual)}" if residual else ""
        return (
            f"SELECT {', '.join(selects)}, {' * '.join(weights)} AS {W} "
            f"FROM {' '.join(sources)}{where}"
        )


def _at(columns: Sequence[str], keys: str) -> At:
    return At(tuple(columns), keys, nulls=False)


def _argmin(values: Sequence[str]) -> str:
    """SQL: the position of the smallest of ``values`` (the first on ties)."""
    cases = [
        f"WHEN {' AND '.join(f'{v} <= {w}' for w in values[k + 1:])} THEN {k}"
        for k, v in enumerate(values[:-1])
    ]
    return f"CASE {' '.join(cases)} ELSE {len(values) - 1} END"


def projected(rows: str, columns: Sequence[str], names: Sequence[str]) -> str:
    """SQL: ``rows``' ``columns`` named ``names``, with the weight; NULL keys dropped."""
    select = ", ".join(f"{quote(c)} AS {quote(n)}" for c, n in zip(columns, names, strict=True))
    not_null = " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)
    return f"SELECT {select}, {W} FROM ({rows}) AS __s WHERE {not_null}"
