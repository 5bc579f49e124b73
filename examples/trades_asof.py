"""Two joins called "as of": a trade priced by the market, and a trade charged at arrival.

A desk records quotes (``quotes``: symbol, time, price) and trades (``trades``: id,
symbol, time, quantity). Two views join them, and answer different questions:

    market_price   ASOF JOIN (event time): each trade with the latest quote at or before
                   the trade's own time. The view always equals DuckDB running the query
                   now, so a quote that arrives late, or is corrected, re-prices the
                   trades it falls before.
    charged        JOIN … FOR SYSTEM_TIME AS OF PROCTIME() (processing time): each trade
                   with the latest quote *when the trade arrived*, locked in. Later
                   quotes, late or corrected, never change what a trade was charged.

The processing-time join reads ``latest_price`` (per symbol, the price of the latest
quote), itself a view. Four epochs show where the two views part:

    1. quotes for AAPL and MSFT at 09:30, and a trade of AAPL at 09:31
    2. a late AAPL quote stamped 09:30:30 arrives: the market price of trade 1 moves,
       its charge does not
    3. an AAPL quote at 09:35 arrives with trade 2, stamped 09:32: the market prices it at
       the 09:30:30 quote, the charge takes the latest price at arrival (09:35's)
    4. the 09:30:30 quote is withdrawn as a bad tick: both trades' market price goes back
       to 09:30's; their charges stay

Run it with ``.venv/bin/python examples/trades_asof.py``.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table

import ivm

console = Console()

SCHEMA = """
    CREATE TABLE quotes (sym VARCHAR, ts TIMESTAMP, price DECIMAL(10,2));
    CREATE TABLE trades (id BIGINT PRIMARY KEY, sym VARCHAR, ts TIMESTAMP, qty INTEGER);
    CREATE VIEW latest_price AS
        SELECT sym, ARG_MAX(price, ts) AS price FROM quotes GROUP BY sym;
    CREATE VIEW market_price AS
        SELECT t.id, t.sym, t.ts, t.qty, q.price AS market, q.ts AS quoted_at
        FROM trades t ASOF JOIN quotes q ON t.sym = q.sym AND t.ts >= q.ts;
    CREATE VIEW charged AS
        SELECT t.id, t.sym, t.qty, p.price AS charged
        FROM trades t JOIN latest_price FOR SYSTEM_TIME AS OF PROCTIME() AS p
          ON t.sym = p.sym;
"""


def at(hour: int, minute: int, second: int = 0) -> datetime:
    """A time on the trading day."""
    return datetime(2024, 3, 1, hour, minute, second)


def quote(sym: str, when: datetime, price: str) -> dict[str, Any]:
    """One quote row."""
    return {"sym": sym, "ts": when, "price": Decimal(price)}


def show(db: ivm.Session, heading: str, why: str) -> None:
    """Both views, trade by trade, after an epoch."""
    market = {r["id"]: r for r in db.read("market_price").to_pylist()}
    charged = {r["id"]: r for r in db.read("charged").to_pylist()}
    table = Table(title=f"Epoch {db.epoch}: {heading}", title_justify="left")
    for column in ("trade", "sym", "traded at", "market (ASOF)", "quote at", "charged"):
        table.add_column(column)
    for trade in sorted(set(market) | set(charged)):
        m, c = market.get(trade, {}), charged.get(trade, {})
        table.add_row(
            str(trade), str(m.get("sym") or c.get("sym")),
            str(m["ts"].time()) if m else "",
            str(m.get("market", "")), str(m["quoted_at"].time()) if m else "",
            str(c.get("charged", "")),
        )
    console.print()
    console.print(table)
    console.print(f"  {why}")


def main() -> None:
    with ivm.connect() as db:
        db.execute(SCHEMA)
        db.ingest({
            "quotes": [quote("AAPL", at(9, 30), "100.00"), quote("MSFT", at(9, 30), "300.00")],
            "trades": [{"id": 1, "sym": "AAPL", "ts": at(9, 31), "qty": 10}],
        })
        show(db, "first quotes, trade 1 at 09:31",
             "Both views agree: the only AAPL quote is 09:30's.")

        db.ingest("quotes", [quote("AAPL", at(9, 30, 30), "101.00")])
        show(db, "a late quote stamped 09:30:30",
             "The market price of trade 1 follows the late quote; its charge was locked in "
             "when it arrived.")

        db.ingest({
            "quotes": [quote("AAPL", at(9, 35), "105.00")],
            "trades": [{"id": 2, "sym": "AAPL", "ts": at(9, 32), "qty": 5}],
        })
        show(db, "a 09:35 quote, and trade 2 stamped 09:32, in one epoch",
             "By event time trade 2 (09:32) takes the 09:30:30 quote; it is charged the "
             "latest price when it arrived, 09:35's (that epoch's changes included).")

        withdrawn = pa.Table.from_pylist([{**quote("AAPL", at(9, 30, 30), "101.00"), "__w": -1}])
        db.ingest("quotes", withdrawn)
        show(db, "the 09:30:30 quote withdrawn (a bad tick)",
             "Both trades' market price goes back to 09:30's quote; charges never move.")
        assert {r["id"]: r["charged"] for r in db.read("charged").to_pylist()} == {
            1: Decimal("100.00"), 2: Decimal("105.00")}
        assert {r["id"]: r["market"] for r in db.read("market_price").to_pylist()} == {
            1: Decimal("100.00"), 2: Decimal("100.00")}


if __name__ == "__main__":
    main()
