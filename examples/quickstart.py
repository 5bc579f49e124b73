"""ivm quickstart: incremental views over a CDC stream, in one screen of output.

ivm keeps SQL views up to date *incrementally*: you declare tables and views once, then
feed change batches ("epochs") with ``db.ingest``. Each call returns, for every view, its
*delta*: the rows that appeared (``__w = +1``) or disappeared (``__w = -1``) in that epoch.
No view is ever recomputed from scratch.

This script walks through a small shop:

    customers(id, name, region)       orders(id, customer_id, amount, status, ts)

with three views:

    revenue_by_region  join + aggregate: revenue and order count per region
    big_open_orders    filter: open orders above 500
    active_regions     DISTINCT: the regions that have at least one order

and five epochs, each using one of the batch formats ivm accepts:

    1. initial load            lists of dicts, two tables in one atomic epoch
    2. new orders              a plain pyarrow table (every row is an insert)
    3. order updates           a Debezium envelope (op 'u' with before/after structs)
    4. deletes                 a weighted pyarrow table (``__w = -1`` per deleted row)
    5. a customer moves        ``mode="upsert"``: the new row replaces the old one by key

then the rest of the README's tour: a subscriber told of every epoch after its commit,
an epoch applied exactly once (``epoch=6``, sent twice), ``db.check`` asking whether a
view can be maintained, and ``db.stats()``.

Run it with ``make demo`` or ``.venv/bin/python examples/quickstart.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from rich import box
from rich.columns import Columns
from rich.console import Console
from rich.table import Table
from rich.text import Text

import ivm

console = Console()

# --- the schema and the views ---------------------------------------------------------------

TABLES = """
    CREATE TABLE customers (id BIGINT PRIMARY KEY, name VARCHAR, region VARCHAR);
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT,
                         amount DECIMAL(12,2), status VARCHAR, ts TIMESTAMP);
"""

# Each view's SQL is kept here so that the end of the script can recompute it from scratch.
VIEWS: dict[str, str] = {
    "revenue_by_region": """
        SELECT c.region, SUM(o.amount) AS revenue, COUNT(*) AS orders
        FROM orders o JOIN customers c ON o.customer_id = c.id
        GROUP BY c.region""",
    "big_open_orders": """
        SELECT id, customer_id, amount
        FROM orders
        WHERE amount > 500 AND status = 'open'""",
    "active_regions": """
        SELECT DISTINCT c.region
        FROM orders o JOIN customers c ON o.customer_id = c.id""",
}

# The Arrow type of an order row, used for the Debezium envelope's before/after structs.
ORDER_TYPE = pa.struct(
    [
        ("id", pa.int64()),
        ("customer_id", pa.int64()),
        ("amount", pa.decimal128(12, 2)),
        ("status", pa.string()),
        ("ts", pa.timestamp("us")),
    ]
)


def create_schema(db: ivm.Session) -> None:
    """Declare the base tables and the views (views start empty, like the tables)."""
    views = "".join(f"CREATE VIEW {name} AS {sql};\n" for name, sql in VIEWS.items())
    db.execute(TABLES + views)


# --- building change batches ----------------------------------------------------------------


def order(id: int, customer_id: int, amount: str, status: str, day: int) -> dict[str, Any]:
    """One order row; amounts are exact decimals, timestamps fall in January 2024."""
    return {
        "id": id,
        "customer_id": customer_id,
        "amount": Decimal(amount),
        "status": status,
        "ts": datetime(2024, 1, day, 12, 0),
    }


def debezium_updates(changes: list[tuple[dict[str, Any], dict[str, Any]]]) -> pa.Table:
    """A Debezium-style envelope: one ``op = 'u'`` row per (before, after) pair.

    ivm deletes ``before`` and inserts ``after``; other envelope columns (``source``,
    ``ts_ms``, ...) would simply be ignored.
    """
    return pa.table(
        {
            "op": pa.array(["u"] * len(changes)),
            "before": pa.array([before for before, _ in changes], type=ORDER_TYPE),
            "after": pa.array([after for _, after in changes], type=ORDER_TYPE),
        }
    )


def weighted(rows: list[dict[str, Any]], weight: int) -> pa.Table:
    """A Z-set batch: the rows plus a ``__w`` column (+n inserts n copies, -n deletes n)."""
    return pa.Table.from_pylist([{**row, "__w": weight} for row in rows])


# --- printing -------------------------------------------------------------------------------


def cell(value: object) -> Text:
    """A value as plain text (Text, so that brackets are never read as rich markup)."""
    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, datetime):
        return Text(value.isoformat(sep=" "))
    return Text(str(value))


def sign(weight: int) -> Text:
    """``+`` for an inserted row, ``-`` for a deleted one (``+n``/``-n`` for n copies)."""
    label = {1: "+", -1: "-"}.get(weight, f"{weight:+d}")
    return Text(label, style="green" if weight > 0 else "red")


def sort_key(row: Iterable[object]) -> tuple[tuple[bool, object], ...]:
    """Order rows by their values, NULLs last, so that output and comparisons are stable."""
    return tuple((value is None, value if value is not None else 0) for value in row)


def rows_of(table: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    """The table's rows as tuples of the given columns, sorted."""
    return sorted((tuple(row[c] for c in columns) for row in table.to_pylist()), key=sort_key)


def is_numeric(table: pa.Table, column: str) -> bool:
    """Whether a column holds numbers (right-aligned when printed)."""
    kind = table.schema.field(column).type
    return pa.types.is_integer(kind) or pa.types.is_decimal(kind) or pa.types.is_floating(kind)


def delta_table(title: str, table: pa.Table) -> Table:
    """A rich table of an Arrow table; a ``__w`` column becomes a leading +/- column."""
    columns = [c for c in table.column_names if c != "__w"]
    has_weight = "__w" in table.column_names
    out = Table(
        title=title,
        title_justify="left",
        min_width=len(title),
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    if has_weight:
        out.add_column("±", justify="center")
    for name in columns:
        out.add_column(name, justify="right" if is_numeric(table, name) else "left")
    for row in rows_of(table, columns + (["__w"] if has_weight else [])):
        cells = [cell(v) for v in row[: len(columns)]]
        out.add_row(*([sign(row[-1])] if has_weight else []), *cells)
    return out


def show_tables(tables: Mapping[str, pa.Table]) -> None:
    """Print several tables side by side, wrapping to the terminal's width."""
    console.print(Columns([delta_table(title, t) for title, t in tables.items()], padding=(1, 4)))


def epoch(db: ivm.Session, heading: str, deltas: Mapping[str, pa.Table]) -> None:
    """Print what one epoch changed: a heading, then each non-empty view delta."""
    console.print()
    console.rule(f"Epoch {db.epoch}: {heading}", align="left", characters="─")
    changed = {view: delta for view, delta in deltas.items() if delta.num_rows > 0}
    if not changed:
        console.print("  (no view changed)")
    show_tables({f"Δ {view}": delta for view, delta in changed.items()})


# --- the walkthrough ------------------------------------------------------------------------


def run_epochs(db: ivm.Session) -> None:
    """Feed five epochs of changes and print every view's delta after each."""
    # Epoch 1: the initial snapshot. One ingest call with several tables is one atomic
    # epoch; a batch with only the table's columns means "insert every row".
    customers = [
        {"id": 1, "name": "Ada", "region": "EU"},
        {"id": 2, "name": "Bao", "region": "APAC"},
        {"id": 3, "name": "Cruz", "region": "US"},
        {"id": 4, "name": "Dana", "region": "EU"},
    ]
    orders = [
        order(101, 1, "120.00", "shipped", 1),
        order(102, 1, "740.00", "open", 2),
        order(103, 2, "90.50", "open", 2),
        order(104, 3, "310.00", "open", 3),
        order(105, 4, "55.25", "shipped", 3),
    ]
    deltas = db.ingest({"customers": customers, "orders": orders})
    epoch(db, "initial load: 4 customers, 5 orders (two tables, one epoch)", deltas)

    # Epoch 2: new orders, as a plain pyarrow table.
    new_orders = pa.Table.from_pylist(
        [order(106, 3, "980.00", "open", 4), order(107, 4, "42.00", "open", 4)]
    )
    deltas = db.ingest("orders", new_orders)
    epoch(db, "2 new orders (plain pyarrow table = inserts)", deltas)

    # Epoch 3: updates from a CDC feed, as a Debezium envelope with op = 'u'.
    # Order 102 ships (leaves big_open_orders); order 104 is raised to 650 (enters it).
    updates = debezium_updates(
        [
            (order(102, 1, "740.00", "open", 2), order(102, 1, "740.00", "shipped", 2)),
            (order(104, 3, "310.00", "open", 3), order(104, 3, "650.00", "open", 3)),
        ]
    )
    deltas = db.ingest("orders", updates)
    epoch(db, "order 102 ships, order 104 raised to 650 (Debezium op='u')", deltas)

    # Epoch 4: deletes, as a weighted table: __w = -1 removes one copy of the row.
    # Order 103 is APAC's only order, so APAC leaves active_regions.
    cancelled = [order(103, 2, "90.50", "open", 2), order(107, 4, "42.00", "open", 4)]
    deltas = db.ingest("orders", weighted(cancelled, -1))
    epoch(db, "orders 103 and 107 deleted (__w = -1); APAC has no orders left", deltas)

    # Epoch 5: a change to a dimension row. With mode="upsert" an insert replaces the
    # row with the same primary key, so the batch needs no "before" image. Cruz moves
    # from US to APAC: both orders follow him in the join, US disappears, APAC returns.
    move = [{"id": 3, "name": "Cruz", "region": "APAC"}]
    deltas = db.ingest("customers", move, mode="upsert")
    epoch(db, "customer Cruz moves from US to APAC (mode='upsert')", deltas)


def show_final_state(db: ivm.Session) -> None:
    """Print every view's current contents and the incremental circuit of one view."""
    console.print()
    console.rule("Final contents (db.read)", align="left", characters="─")
    show_tables({view: db.read(view) for view in VIEWS})
    console.print()
    console.rule('db.explain("revenue_by_region")', align="left", characters="─")
    # soft_wrap: long plan lines are left to the terminal instead of being re-broken.
    console.print(db.explain("revenue_by_region"), soft_wrap=True, markup=False, highlight=False)


def show_the_rest_of_the_tour(db: ivm.Session) -> None:
    """A subscriber, an exactly-once epoch sent twice, ``db.check`` and ``db.stats()``."""
    console.print()
    console.rule("A subscriber, and epoch 6 sent twice (ingest(..., epoch=6))", align="left",
                 characters="─")
    told: list[tuple[int, int]] = []
    db.subscribe("revenue_by_region", lambda n, delta: told.append((n, delta.num_rows)),
                 snapshot=False)
    late = [order(108, 1, "15.00", "open", 5)]
    first = db.ingest("orders", late, epoch=6)
    again = db.ingest("orders", late, epoch=6)  # a retry (a stream restarted): a no-op
    assert db.epoch == 6 and again["revenue_by_region"].equals(first["revenue_by_region"])
    console.print(f"  the subscriber was told of epoch(s) {[n for n, _ in told]} "
                  f"({told[0][1]} changed rows); the second send returned the stored "
                  f"deltas and applied nothing (epoch {db.epoch})", highlight=False)
    console.print()
    console.rule("db.check: can this view be maintained?", align="left", characters="─")
    for query in ("SELECT status, MEDIAN(amount) AS m FROM orders GROUP BY status",
                  "SELECT id, random() AS r FROM orders"):
        verdict = str(db.check(query)).splitlines()[0]
        console.print(Text(f"  {query}\n    -> {verdict}"))
    console.print()
    console.rule("db.stats()", align="left", characters="─")
    stats = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("name", "kind", "rows", "state bytes", "last epoch ms", "epochs"):
        stats.add_column(column, justify="left" if column in ("name", "kind") else "right")
    for s in db.stats().values():
        last = "-" if s.last_seconds is None else f"{s.last_seconds * 1000:.1f}"
        stats.add_row(s.name, s.kind, str(s.rows), f"{s.state_bytes:,}", last, str(s.epochs))
    console.print(stats)


def verify(db: ivm.Session) -> None:
    """Check that each maintained view equals its SQL recomputed from the base tables."""
    for view, sql in VIEWS.items():
        maintained = db.read(view)
        columns = maintained.column_names
        recomputed = db.sql(sql)
        if rows_of(maintained, columns) != rows_of(recomputed, columns):
            raise AssertionError(
                f"view {view} drifted from its definition:\n"
                f"  maintained: {rows_of(maintained, columns)}\n"
                f"  recomputed: {rows_of(recomputed, columns)}"
            )
    console.print()
    console.print("✓ every view equals recomputation")


def main() -> None:
    with ivm.connect() as db:  # in memory; ivm.connect("some/dir") would persist state
        create_schema(db)
        run_epochs(db)
        show_final_state(db)
        show_the_rest_of_the_tour(db)
        verify(db)


if __name__ == "__main__":
    main()
