"""Bad calls of the other entry points: reading, SQL, explain, check, changefeeds, sinks,
settings, serving, and ``ivm.connect``'s arguments."""

from __future__ import annotations

from bad_input.cases import Case, call
from ivm import EpochError, IvmError, SchemaError, SqlError, StateError

S = SqlError

READING = [
    call("read-unknown", "read", ("nope",), S, "'nope'"),
    call("read-not-text", "read", (5,), IvmError, "5"),
    call("read-empty-name", "read", ("",), S, "''"),
    call("read-internal-table", "read", ("__ivm_meta",), S, "'__ivm_meta'"),
    call("read-trace-of-a-table", "read", ("__ivm_rel_orders",), S, "'__ivm_rel_orders'"),
    call("sql-not-text", "sql", (5,), IvmError, "int"),
    call("sql-empty", "sql", ("",), S, "read-only query"),
    call("sql-delete", "sql", ("DELETE FROM orders",), S, "read-only query"),
    call("sql-drop-after-select", "sql", ("SELECT 1; DROP TABLE orders",), S, "read-only"),
    call("sql-copy-out", "sql", ("COPY (SELECT 1) TO 'x.csv'",), S, "read-only"),
    call("sql-create", "sql", ("CREATE TABLE e (a INT)",), S, "read-only"),
    call("sql-set", "sql", ("SET threads = 1",), S, "read-only"),
    call("sql-pragma", "sql", ("PRAGMA database_list",), S, "read-only"),
    call("sql-unknown-table", "sql", ("SELECT * FROM nope",), S, "nope"),
    call("sql-unknown-column", "sql", ("SELECT zz FROM orders",), S, "zz"),
    call("sql-unparseable", "sql", ("SELEC 1",), S, "line 1"),
    call("sql-failing-value", "sql", ("SELECT CAST(customer AS INT) AS c FROM orders",), S,
         "LINE 1: SELECT CAST(customer AS INT) AS c FROM orders", "column customer"),
    call("plain-sql-unknown", "plain_sql", ("nope",), S, "'nope'"),
    call("plain-sql-of-a-table", "plain_sql", ("orders",), S, "'orders'"),
]

EXPLAINING = [
    call("explain-unknown", "explain", ("nope",), S, "'nope'"),
    call("explain-a-table", "explain", ("orders",), S, "'orders'"),
    call("explain-bad-format", "explain", ("revenue",), IvmError, "'jpeg'", format="jpeg"),
    call("check-not-text", "check", (5,), IvmError, "int"),
    call("check-a-create-table", "check", ("CREATE TABLE e (a INT)",), S, "CREATE VIEW"),
]

CHANGEFEEDS = [
    call("subscribe-unknown", "subscribe", ("nope", print), S, "'nope'"),
    call("subscribe-a-table", "subscribe", ("orders", print), S, "'orders'"),
    call("subscribe-not-callable", "subscribe", ("revenue", 5), IvmError, "callable"),
    call("changelog-unknown", "changelog", ("nope",), S, "'nope'", retain=3),
    call("changelog-negative", "changelog", ("revenue",), IvmError, "-1", retain=-1),
    call("changelog-text", "changelog", ("revenue",), IvmError, "'3'", retain="3"),
    call("changes-unknown", "changes", ("nope",), S, "'nope'", since=0),
    call("changes-without-changelog", "changes", ("joined",), IvmError, "'joined'", since=0),
    call("changes-negative", "changes", ("revenue",), EpochError, "-5", since=-5),
    call("changes-text", "changes", ("revenue",), EpochError, "'x'", since="x"),
    call("sink-unknown-table", "sink", ("nope",), SchemaError, "'nope'"),
    call("sink-of-a-view", "sink", ("revenue",), SchemaError, "'revenue'"),
    call("serve-bad-port", "serve", ("x",), IvmError, "'x'"),
]

SETTINGS = [
    call("iteration-limit-zero", "setattr", ("iteration_limit", 0), IvmError, "iteration_limit"),
    call("iteration-limit-text", "setattr", ("iteration_limit", "x"), IvmError, "'x'"),
    call("join-plan-unknown", "setattr", ("join_plan", "magic"), IvmError, "'magic'"),
    call("recompute-fraction-text", "setattr", ("recompute_fraction", "x"), IvmError, "'x'"),
    call("recompute-fraction-negative", "setattr", ("recompute_fraction", -1), IvmError, "-1"),
]

CONNECT = [
    Case("connect-settings-not-a-dict", "connect", (), IvmError, ("settings",),
         {"settings": "UTC"}, setup="none"),
    Case("connect-unknown-setting", "connect", (), IvmError, ("threads",),
         {"settings": {"threads": 1}}, setup="none"),
    Case("connect-bad-time-zone", "connect", (), IvmError, ("Mars/Olympus",),
         {"settings": {"TimeZone": "Mars/Olympus"}}, setup="none"),
    Case("connect-bad-plan-change", "connect", (), IvmError, ("on_plan_change",),
         {"on_plan_change": "sometimes"}, setup="none"),
    Case("connect-bad-iteration-limit", "connect", (), IvmError, ("iteration_limit",),
         {"iteration_limit": -1}, setup="none"),
    Case("connect-partitions-without-spark", "connect", (), IvmError, ("partitions",),
         {"partitions": 3}, setup="none"),
    Case("connect-path-not-a-path", "connect", (5,), IvmError, ("5",), setup="none"),
    Case("connect-spark-not-a-session", "connect", (), IvmError, ("spark",),
         {"spark": "local"}, setup="none"),
    Case("connect-state-in-a-file", "connect", ("{file}",), StateError, ("{file}",),
         setup="none"),
]

CASES: list[Case] = [*READING, *EXPLAINING, *CHANGEFEEDS, *SETTINGS, *CONNECT]
"""Every bad call of the corpus's other entry points."""
