"""Bad DDL (``db.execute``): names, quotes, reserved names, cycles of views, constraints,
statements ivm does not run, and SQL it cannot maintain, one of each family."""

from __future__ import annotations

from bad_input.cases import Case, execute
from ivm import IvmError, SqlError, UnsupportedSQL

S, U = SqlError, UnsupportedSQL

NAMES = [
    execute("empty-table-name", 'CREATE TABLE "" (a INT)', S, "line 1"),
    execute("empty-column-name", 'CREATE TABLE e ("" INT)', S, "line 1"),
    execute("nul-in-table-name", 'CREATE TABLE "x\x00y" (a INT)', S, "line 1"),
    execute("nul-in-column-name", 'CREATE TABLE e ("a\x00b" INT)', S, "line 1"),
    execute("nul-in-view-name", 'CREATE VIEW "v\x00w" AS SELECT k FROM events', S, "line 1"),
    execute("reserved-table-name", "CREATE TABLE __ivm_x (a INT)", S, "'__ivm_x'", "reserved"),
    execute("reserved-name-any-case", 'CREATE TABLE "__IVM_meta" (a INT)', S, "'__IVM_meta'"),
    execute("reserved-view-name", "CREATE VIEW __ivm_rel_orders AS SELECT k FROM events", S,
            "'__ivm_rel_orders'", "reserved"),
    execute("reserved-column-name", 'CREATE TABLE e (id INT, "__ivm_rh" INT)', S, "'__ivm_rh'",
            "reserved"),
    execute("reserved-view-column", 'CREATE VIEW e AS SELECT k AS "__ivm_pos" FROM events', S,
            "'__ivm_pos'", "reserved"),
    execute("reserved-added-column", "ALTER TABLE events ADD COLUMN __ivm_z INT", S,
            "'__ivm_z'", "reserved"),
    execute("reserved-renamed-column", "ALTER TABLE events RENAME COLUMN v TO __ivm_v", S,
            "'__ivm_v'", "reserved"),
    execute("weight-column-name", "CREATE TABLE e (__w INT)", S, "'__w'", "line 1"),
    execute("weight-view-column", "CREATE VIEW e AS SELECT k AS __w FROM events", S, "'__w'"),
    execute("weight-added-column", "ALTER TABLE events ADD COLUMN __w INT", S, "'__w'"),
    execute("keyword-name-unquoted", "CREATE TABLE semi (a INT)", S, "'semi'", "keyword"),
    execute("backtick-quotes", "CREATE TABLE `bt` (a INT)", S, "line 1"),
    execute("unterminated-quote", 'CREATE TABLE "open (a INT)', S, "line 1"),
    execute("qualified-name", "CREATE TABLE main.e (a INT)", U, "qualified name", "line 1"),
    execute("other-schema-name", "CREATE VIEW other.e AS SELECT k FROM events", U,
            "qualified name"),
    execute("duplicate-column", "CREATE TABLE e (a INT, A INT)", S, "'A'", "duplicate"),
    execute("table-exists", "CREATE TABLE orders (a INT)", S, "'orders'", "exists"),
    execute("view-name-of-a-table", "CREATE VIEW events AS SELECT 1 AS a", S, "'events'"),
    execute("table-name-of-a-view", "CREATE TABLE revenue (a INT)", S, "'revenue'"),
    execute("same-name-twice-in-a-script", "CREATE TABLE e (a INT); CREATE TABLE e (b INT)", S,
            "'e'"),
    execute("unknown-type", "CREATE TABLE e (a NOTATYPE)", S, "NOTATYPE"),
    execute("no-columns", "CREATE TABLE e ()", S, "CREATE TABLE e", "needs a column"),
]

VIEW_GRAPH = [
    execute("view-reads-itself", "CREATE VIEW selfie AS SELECT * FROM selfie", S, "'selfie'"),
    execute("cycle-in-one-script",
            "CREATE VIEW c1 AS SELECT * FROM c2; CREATE VIEW c2 AS SELECT * FROM c1", S, "'c2'"),
    execute("cycle-by-replace",
            "CREATE VIEW c1 AS SELECT k FROM events; CREATE VIEW c2 AS SELECT k FROM c1; "
            "CREATE OR REPLACE VIEW c1 AS SELECT k FROM c2", S, "'k'", "line 1, column 113"),
    execute("replace-table-breaking-its-views",
            "CREATE OR REPLACE TABLE events (k INTEGER, v DOUBLE)", S, "'s'"),
    execute("drop-table-with-views", "DROP TABLE orders", S, "'orders'", "'revenue'"),
    execute("drop-view-named-as-table", "DROP VIEW events", S, "'events'"),
    execute("drop-table-named-as-view", "DROP TABLE revenue", S, "'revenue'"),
    execute("drop-unknown", "DROP TABLE nope", S, "'nope'"),
    execute("failing-view-after-good-table",
            "CREATE TABLE okt (a INT); CREATE VIEW bad AS SELECT zz FROM okt", S, "'zz'",
            "line 1"),
    execute("failing-statement-after-drop",
            "DROP VIEW sources; CREATE VIEW joined AS SELECT 1 AS a", S, "'joined'"),
    execute("unknown-column-in-view", "CREATE VIEW e AS SELECT zz FROM events", S, "'zz'",
            "line 1, column 25"),
    execute("unknown-table-in-view", "CREATE VIEW e AS SELECT * FROM nope", S, "'nope'"),
    execute("ambiguous-column", "CREATE VIEW e AS SELECT id FROM orders JOIN joined USING (qty)", S,
            "'id'", "ambiguous"),
    execute("duplicate-alias-in-from", "CREATE VIEW e AS SELECT * FROM events, events", S,
            "events"),
    execute("view-reads-internal-table", "CREATE VIEW e AS SELECT * FROM __ivm_meta", S,
            "'__ivm_meta'"),
]

CONSTRAINTS_AND_ALTER = [
    execute("check-constraint", "CREATE TABLE e (a INT CHECK (a > 0))", U, "CHECK", "line 1"),
    execute("default-value", "CREATE TABLE e (a INT DEFAULT 5)", U, "DEFAULT"),
    execute("unique-constraint", "CREATE TABLE e (a INT UNIQUE)", U, "UNIQUE"),
    execute("foreign-key", "CREATE TABLE e (a INT REFERENCES orders (id))", U, "REFERENCES"),
    execute("two-primary-keys", "CREATE TABLE e (a INT PRIMARY KEY, b INT PRIMARY KEY)", S,
            "PRIMARY KEY", "'e'"),
    execute("key-of-unknown-column", "CREATE TABLE e (a INT, PRIMARY KEY (zz))", S, "'zz'"),
    execute("create-table-as", "CREATE TABLE e AS SELECT 1 AS a", U, "CREATE TABLE AS"),
    execute("temp-table", "CREATE TEMP TABLE e (a INT)", U, "TEMPORARY"),
    execute("view-column-list", "CREATE VIEW e (x) AS SELECT k FROM events", U,
            "view column list"),
    execute("alter-drop-key-column", "ALTER TABLE orders DROP COLUMN id", S, "'id'",
            "primary key"),
    execute("alter-rename-onto-column", "ALTER TABLE orders RENAME COLUMN qty TO id", S, "'id'"),
    execute("alter-add-existing", "ALTER TABLE orders ADD COLUMN qty INT", S, "'qty'"),
    execute("alter-unknown-table", "ALTER TABLE nope ADD COLUMN z INT", S, "'nope'"),
    execute("alter-drop-read-column", "ALTER TABLE orders DROP COLUMN qty", S, "'joined'"),
    execute("alter-column-type", "ALTER TABLE orders ALTER COLUMN qty TYPE BIGINT", U,
            "ALTER TABLE orders"),
    execute("alter-rename-table", "ALTER TABLE orders RENAME TO o2", U, "ALTER TABLE orders"),
    execute("alter-view", "ALTER VIEW revenue RENAME TO r2", U, "ALTER"),
]

STATEMENTS = [
    execute("statement-" + word.lower().replace(" ", "-"), sql, U, word)
    for word, sql in [
        ("INSERT", "INSERT INTO orders VALUES (9, 'a', 1, 1, NULL, NULL, NULL)"),
        ("UPDATE", "UPDATE orders SET qty = 2"),
        ("DELETE", "DELETE FROM orders"),
        ("SELECT", "SELECT 1"),
        ("ATTACH", "ATTACH 'other.db'"),
        ("COPY", "COPY orders TO 'out.csv'"),
        ("PRAGMA", "PRAGMA version"),
        ("SET", "SET threads = 1"),
        ("INSTALL", "INSTALL httpfs"),
        ("TRANSACTION", "BEGIN"),
        ("CREATE INDEX", "CREATE INDEX i ON orders (qty)"),
        ("CREATE SEQUENCE", "CREATE SEQUENCE q"),
        ("CREATE MACRO", "CREATE MACRO m(a) AS a + 1"),
        ("CREATE SCHEMA", "CREATE SCHEMA q"),
        # sqlglot reads these as something else, or cannot parse them: refused by name
        ("CHECKPOINT", "CHECKPOINT"),
        ("FORCE CHECKPOINT", "FORCE CHECKPOINT"),
        ("LOAD", "LOAD httpfs"),
        ("VACUUM", "VACUUM"),
        ("CALL", "CALL pragma_version()"),
        ("EXPORT", "EXPORT DATABASE 'out'"),
        ("TRUNCATE", "TRUNCATE orders"),
        ("CREATE TYPE", "CREATE TYPE mood AS ENUM ('a')"),
    ]
] + [
    execute("execute-not-text", 5, IvmError, "int"),
    execute("execute-none", None, IvmError, "NoneType"),
    execute("unparseable", "CREATE VIEW e AS SELEC * FROM events", S, "line 1"),
]

REFUSED_FAMILIES = [
    execute(f"refused-{family}", f"CREATE VIEW e AS {query}", U, *words)
    for family, query, words in [
        ("random", "SELECT random() AS r FROM events", ("non-deterministic", "line 1")),
        ("now", "SELECT k, now() AS t FROM events", ("non-deterministic", "column 28")),
        ("uuid", "SELECT uuid() AS u FROM events", ("non-deterministic",)),
        ("read-csv", "SELECT * FROM read_csv('/etc/passwd')", ("read_csv",)),
        ("glob", "SELECT * FROM glob('*')", ("glob",)),
        ("catalog-function", "SELECT * FROM duckdb_tables()", ("duckdb_tables",)),
        ("limit-without-order", "SELECT k FROM events LIMIT 1", ("LIMIT",)),
        ("unordered-list", "SELECT list(k) AS l FROM events", ("LIST", "ORDER BY")),
        ("unordered-string-agg", "SELECT string_agg(s, ',') AS a FROM events", ("STRING_AGG",)),
        ("asof-right", "SELECT * FROM events e ASOF RIGHT JOIN pairs p ON e.k >= p.x",
         ("ASOF RIGHT JOIN",)),
        ("positional-join", "SELECT * FROM events POSITIONAL JOIN pairs", ("POSITIONAL JOIN",)),
        ("sample", "SELECT * FROM events USING SAMPLE 50%", ("SAMPLE",)),
        ("tablesample", "SELECT * FROM events TABLESAMPLE (1 ROWS)", ("SAMPLE",)),
    ]
] + [
    execute("parameter", "CREATE VIEW e AS SELECT $1 AS a FROM events", S, "parameter"),
    execute("unknown-function", "CREATE VIEW e AS SELECT getenv('HOME') AS h FROM events", S,
            "getenv"),
    execute("for-update", "CREATE VIEW e AS SELECT k FROM events FOR UPDATE", S, "FOR"),
]

CASES: list[Case] = [*NAMES, *VIEW_GRAPH, *CONSTRAINTS_AND_ALTER, *STATEMENTS,
                     *REFUSED_FAMILIES]
"""Every bad DDL script of the corpus."""
