"""Each public error class (API.md, "Errors"), raised where the contract says."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import ivm

TABLE = "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, n INTEGER NOT NULL, x DOUBLE)"
GOOD_ROW = {"id": 1, "name": "a", "n": 1, "x": 1.5}


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute(TABLE)
    yield session
    session.close()


@pytest.mark.parametrize(
    "cls",
    [ivm.SqlError, ivm.UnsupportedSQL, ivm.SchemaError, ivm.ConstraintError, ivm.StateError],
)
def test_every_error_derives_from_ivm_error(cls):
    assert issubclass(cls, ivm.IvmError)
    assert issubclass(ivm.IvmError, Exception)


# -- SqlError ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE (",
        "CREATE TABLE u (id BIGINT,",
        "CREATE VIEW v AS SELECT FROM WHERE",
        "CREATE VIEW v AS SELEC * FROM t",
        "CREATE VIEW v AS SELECT id FROM t WHERE (id > 1",
    ],
)
def test_unparseable_sql_is_sql_error(db, sql):
    with pytest.raises(ivm.SqlError):
        db.execute(sql)
    assert db.sql("SELECT count(*) AS c FROM duckdb_views() WHERE view_name = 'v'").to_pylist() == [
        {"c": 0}
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW v AS SELECT * FROM nope",
        "CREATE VIEW v AS SELECT nope FROM t",
        "CREATE VIEW v AS SELECT t.id FROM t JOIN nope ON t.id = nope.id",
        "CREATE VIEW v AS SELECT name, SUM(nope) AS s FROM t GROUP BY name",
    ],
)
def test_unknown_table_or_column_in_view_is_sql_error(db, sql):
    with pytest.raises(ivm.SqlError):
        db.execute(sql)
    # the failed view does not exist afterwards
    db.execute("CREATE VIEW v AS SELECT id FROM t")
    assert db.read("v").column_names == ["id"]


def test_error_message_names_the_unknown_table(db):
    with pytest.raises(ivm.SqlError, match="nope"):
        db.execute("CREATE VIEW v AS SELECT * FROM nope")


def test_duplicate_name_is_sql_error(db):
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE TABLE t (id BIGINT)")
    db.execute("CREATE VIEW v AS SELECT id FROM t")
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE VIEW v AS SELECT name FROM t")
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE TABLE v (id BIGINT)")


def test_read_and_explain_of_unknown_name_is_sql_error(db):
    with pytest.raises(ivm.SqlError):
        db.read("nope")
    with pytest.raises(ivm.SqlError):
        db.explain("nope")


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE t",
        "INSERT INTO t VALUES (1, 'a', 1, 1.0)",
        "CREATE TABLE u (id BIGINT)",
        "DELETE FROM t",
        "SELECT 1; SELECT 2",
        "SELEC 1",
    ],
)
def test_sql_refuses_anything_but_one_query(db, query):
    with pytest.raises(ivm.SqlError):
        db.sql(query)
    assert db.read("t").num_rows == 0
    assert db.sql("SELECT count(*) AS c FROM t").to_pylist() == [{"c": 0}]


def test_sql_over_unknown_table_is_sql_error(db):
    with pytest.raises(ivm.SqlError):
        db.sql("SELECT * FROM nope")


# -- UnsupportedSQL ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("CREATE VIEW v AS SELECT t.id FROM t ASOF RIGHT JOIN t AS u ON t.id >= u.id",
         "ASOF RIGHT JOIN"),
        ("CREATE VIEW v AS SELECT * FROM t FULL JOIN t AS u USING (id) JOIN t AS w USING (id)",
         "USING after a RIGHT or FULL JOIN"),
        ("CREATE VIEW v AS SELECT id FROM t LIMIT 3", "LIMIT"),
        ("CREATE VIEW v AS SELECT id FROM t ORDER BY ROW_NUMBER() OVER (ORDER BY id)", "window"),
        ("CREATE VIEW v AS SELECT id, random() AS r FROM t", "non-deterministic"),
    ],
)
def test_unsupported_sql_names_the_construct(db, sql, construct):
    with pytest.raises(ivm.UnsupportedSQL) as info:
        db.execute(sql)
    assert construct.lower() in str(info.value).lower()
    assert not isinstance(info.value, ivm.SqlError)  # distinct from "cannot parse"


def test_unsupported_statement(db):
    with pytest.raises(ivm.UnsupportedSQL, match="INSERT"):
        db.execute("INSERT INTO t VALUES (1, 'a', 1, 1.0)")


# -- SchemaError -------------------------------------------------------------------------


def test_missing_column_is_schema_error(db):
    with pytest.raises(ivm.SchemaError, match="x"):
        db.ingest("t", [{"id": 1, "name": "a", "n": 1}])


def test_unknown_column_is_schema_error(db):
    with pytest.raises(ivm.SchemaError, match="colour"):
        db.ingest("t", [{**GOOD_ROW, "colour": "red"}])


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("id", pa.array([1.5], pa.float64())),
        ("id", pa.array([1.0], pa.float64())),  # float into BIGINT is refused even when whole
        ("n", pa.array(["1"], pa.string())),
        ("n", pa.array([2**40], pa.int64())),  # out of INTEGER's range
        ("x", pa.array(["1.5"], pa.string())),
    ],
)
def test_lossy_cast_is_schema_error(db, column, values):
    data = {
        "id": pa.array([1], pa.int64()),
        "name": pa.array(["a"]),
        "n": pa.array([1], pa.int32()),
        "x": pa.array([1.5]),
    }
    data[column] = values
    with pytest.raises(ivm.SchemaError, match=column):
        db.ingest("t", pa.table(data))
    assert db.read("t").num_rows == 0
    assert db.epoch == 0


def test_non_integer_weight_is_schema_error(db):
    with pytest.raises(ivm.SchemaError):
        db.ingest("t", [{**GOOD_ROW, "__w": 1.5}])


def test_bad_change_code_is_schema_error(db):
    with pytest.raises(ivm.SchemaError):
        db.ingest("t", [{**GOOD_ROW, "_change_type": "upsert"}])
    with pytest.raises(ivm.SchemaError):
        db.ingest("t", [{"op": "x", "before": None, "after": GOOD_ROW}])


def test_rows_with_different_keys_is_schema_error(db):
    with pytest.raises(ivm.SchemaError):
        db.ingest("t", [GOOD_ROW, {"id": 2, "name": "b", "n": 2}])


def test_unknown_table_is_schema_error(db):
    with pytest.raises(ivm.SchemaError):
        db.ingest("nope", [GOOD_ROW])


# -- ConstraintError ---------------------------------------------------------------------


def test_delete_of_absent_row_is_constraint_error(db):
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{**GOOD_ROW, "__w": -1}])
    db.ingest("t", [GOOD_ROW])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{**GOOD_ROW, "__w": -2}])


def test_delete_of_absent_row_without_key_is_constraint_error():
    db = ivm.connect()
    db.execute("CREATE TABLE bag (v BIGINT)")
    db.ingest("bag", [{"v": 1, "__w": 2}])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("bag", [{"v": 1, "__w": -3}])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("bag", [{"v": 2, "__w": -1}])
    db.ingest("bag", [{"v": 1, "__w": -2}])
    assert db.read("bag").num_rows == 0


def test_debezium_delete_of_absent_row_is_constraint_error(db):
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{"op": "d", "before": GOOD_ROW, "after": None}])


def test_duplicate_key_is_constraint_error(db):
    db.ingest("t", [GOOD_ROW])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{**GOOD_ROW, "name": "other"}])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{**GOOD_ROW, "id": 2}, {**GOOD_ROW, "id": 2, "n": 9}])


def test_composite_key_duplicate_is_constraint_error():
    db = ivm.connect()
    db.execute("CREATE TABLE c (a BIGINT, b VARCHAR, v BIGINT, PRIMARY KEY (a, b))")
    db.ingest("c", [{"a": 1, "b": "x", "v": 1}, {"a": 1, "b": "y", "v": 1}])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("c", [{"a": 1, "b": "x", "v": 2}])
    with pytest.raises(ivm.ConstraintError):
        db.ingest("c", [{"a": None, "b": "x", "v": 2}])
    assert db.read("c").num_rows == 2


def test_null_key_is_constraint_error(db):
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", [{**GOOD_ROW, "id": None}])


def test_null_in_not_null_column_is_constraint_error(db):
    with pytest.raises(ivm.ConstraintError, match="n"):
        db.ingest("t", [{**GOOD_ROW, "n": None}])
    # a nullable column accepts NULL
    db.ingest("t", [{**GOOD_ROW, "name": None, "x": None}])
    assert db.read("t").to_pylist() == [{"id": 1, "name": None, "n": 1, "x": None}]


# -- StateError --------------------------------------------------------------------------


def test_garbage_state_file_is_state_error(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "ivm.duckdb").write_bytes(b"this is not a duckdb database\x00" * 200)
    with pytest.raises(ivm.StateError):
        ivm.connect(state)


def test_state_path_that_is_a_file_is_state_error(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ivm.StateError):
        ivm.connect(path)


def damaged_state(tmp_path, ddl: str, *damage: str):
    """A persistent state made with ``ddl``, then changed behind ivm's back."""
    state = tmp_path / "state"
    with ivm.connect(state) as db:
        db.execute(ddl)
    con = duckdb.connect(str(state / "ivm.duckdb"))
    for statement in damage:
        con.execute(statement)
    con.close()
    return state


def test_state_of_another_format_is_state_error(tmp_path):
    state = damaged_state(tmp_path, "CREATE TABLE t (id BIGINT)",
                          "UPDATE __ivm_meta SET format = 999")
    with pytest.raises(ivm.StateError):
        ivm.connect(state)


def test_corrupt_catalog_entry_is_state_error(tmp_path):
    state = damaged_state(
        tmp_path, "CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t",
        "UPDATE __ivm_catalog SET definition = 'not json' WHERE name = 't'",
    )
    with pytest.raises(ivm.StateError):
        ivm.connect(state)


def test_state_missing_a_trace_is_state_error(tmp_path):
    state = damaged_state(
        tmp_path, "CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t",
        'DROP VIEW "v"', 'DROP TABLE "__ivm_rel_v"',
    )
    with pytest.raises(ivm.StateError):
        db = ivm.connect(state)
        db.ingest("t", [{"id": 1}])


# -- a closed session --------------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        lambda db: db.read("t"),
        lambda db: db.ingest("t", [GOOD_ROW]),
        lambda db: db.sql("SELECT * FROM t"),
        lambda db: db.execute("CREATE TABLE u (id BIGINT)"),
    ],
    ids=["read", "ingest", "sql", "execute"],
)
def test_use_after_close_raises_ivm_error(use):
    db = ivm.connect()
    db.execute(TABLE)
    db.close()
    with pytest.raises(ivm.IvmError):
        use(db)
