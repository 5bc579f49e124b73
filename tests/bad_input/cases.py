"""The record every corpus case is, and the sessions cases run against.

A case names an entry point (a ``Session`` method, ``connect`` or ``cli``), its
arguments, the setup whose session it runs in, the ``IvmError`` class it must raise and
the words its message must hold (the user's table, column, view or position). Arguments
that a call consumes (a record batch reader, a DuckDB relation) are ``Fresh``: built anew
for each run.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import ivm


@dataclass(frozen=True)
class Fresh:
    """An argument built when the case runs (``make()``), not when the corpus is read."""

    make: Callable[[], Any]


@dataclass(frozen=True)
class Case:
    """One bad input: ``call(*args, **kwargs)`` on a session of ``setup`` must raise
    ``error`` with every one of ``words`` in its message (case-insensitive)."""

    id: str
    call: str
    args: tuple[Any, ...]
    error: type[ivm.IvmError]
    words: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    setup: str = "shop"
    xfail: str | None = None

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments, ``Fresh`` ones built now."""
        def built(value: Any) -> Any:
            return value.make() if isinstance(value, Fresh) else value
        return tuple(map(built, self.args)), {k: built(v) for k, v in self.kwargs.items()}


def ingest(id_: str, table: Any, batch: Any, error: type[ivm.IvmError], *words: str,
           xfail: str | None = None, **kwargs: Any) -> Case:
    """A bad ``db.ingest(table, batch, **kwargs)``."""
    return Case(id_, "ingest", (table, batch), error, words, kwargs, xfail=xfail)


def execute(id_: str, sql: Any, error: type[ivm.IvmError], *words: str,
            xfail: str | None = None) -> Case:
    """A bad ``db.execute(sql)``."""
    return Case(id_, "execute", (sql,), error, words, xfail=xfail)


def call(id_: str, method: str, args: tuple[Any, ...], error: type[ivm.IvmError], *words: str,
         xfail: str | None = None, **kwargs: Any) -> Case:
    """A bad call of any other session method (or ``setattr`` of a setting)."""
    return Case(id_, method, args, error, words, kwargs, xfail=xfail)


SHOP = """
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, amount DECIMAL(12, 2),
                     qty INTEGER, tags VARCHAR[], day DATE);
CREATE TABLE docs (id BIGINT PRIMARY KEY, meta STRUCT(src VARCHAR, n INTEGER));
CREATE TABLE events (k INTEGER, v DOUBLE, s VARCHAR);
CREATE TABLE pairs (a BIGINT, b VARCHAR, x INTEGER, PRIMARY KEY (a, b));
CREATE TABLE ratings (r DOUBLE PRIMARY KEY, y INTEGER);
CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders
    GROUP BY customer;
CREATE VIEW event_counts AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM events GROUP BY k;
CREATE VIEW joined AS SELECT o.id, o.qty, p.b, p.x FROM orders o JOIN pairs p ON o.id = p.a
    WHERE o.qty > 1;
CREATE VIEW coded AS SELECT k, CAST(s AS INTEGER) AS code FROM events;
CREATE VIEW sources AS SELECT meta.src AS src, SUM(meta.n) AS n FROM docs GROUP BY meta.src;
"""
"""The corpus's schema: keyed, keyless, composite-key and DOUBLE-key tables, nested types
(lists; a STRUCT apart, in ``docs``: Spark mode's sample has none),
and views of every common kind (one, ``coded``, fails on a bad value)."""

DAY = datetime.date(2026, 1, 1)


def order(id_: int, **changes: Any) -> dict[str, Any]:
    """A good row of ``orders``."""
    row = {"id": id_, "customer": "ada", "amount": Decimal("10.50"), "qty": 2, "tags": ["x"],
           "day": DAY}
    row.update(changes)
    return row


def event(k: int = 1, v: float = 1.0, s: str = "7", **extra: Any) -> dict[str, Any]:
    """A good row of ``events``."""
    return {"k": k, "v": v, "s": s, **extra}


def pair(a: int = 1, b: str = "p", x: int = 1, **extra: Any) -> dict[str, Any]:
    """A good row of ``pairs``."""
    return {"a": a, "b": b, "x": x, **extra}


SHOP_ROWS: dict[str, list[dict[str, Any]]] = {
    "orders": [order(1), order(2, customer="bob", qty=1, tags=None, day=None)],
    "docs": [{"id": 1, "meta": {"src": "web", "n": 1}}],
    "events": [event(), event(), event(2, float("nan"), "3")],
    "pairs": [pair(), pair(2, "q", 5)],
    "ratings": [{"r": float("nan"), "y": 1}, {"r": 0.0, "y": 2}, {"r": 1.5, "y": 3}],
}
"""The rows every shop session starts with (a NaN key, a keyless row held twice)."""


def shop_session() -> Any:
    """A fresh in-memory session of the shop schema and rows."""
    db = ivm.connect()
    db.execute(SHOP)
    db.ingest(SHOP_ROWS)
    return db


def good_batch(n: int) -> dict[str, list[dict[str, Any]]]:
    """A batch that must apply after any bad one: new rows in every table (``n`` unique)."""
    return {"orders": [order(1000 + n, customer=f"c{n % 3}", qty=n % 4)],
            "events": [event(n % 5, 0.5, str(n))],
            "pairs": [pair(1000 + n, "g", n)],
            "ratings": [{"r": 1000.0 + n, "y": n}],
            "docs": [{"id": 1000 + n, "meta": {"src": "app", "n": n}}]}
