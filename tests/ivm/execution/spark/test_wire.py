"""ivm.wire: every supported DuckDB type travels through its Spark-safe carrier exactly.

Values go DuckDB → ``to_wire_sql`` → Arrow → ``conform`` → ``from_wire_sql`` → DuckDB
and are compared inside DuckDB (by value, NULL-safe, and by text, so -0.0 and the
digits of decimals count). The connection runs in a non-UTC time zone so that time
zone handling is exercised. No Spark here.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pytest

from ivm.errors import UnsupportedSQL
from ivm.execution.spark.wire import (
    arrow_schema,
    conform,
    from_wire_sql,
    positional,
    to_wire_sql,
    wire_type,
    wire_types,
)
from ivm.schema import WEIGHT, Column, Schema, quote

ODD = 'odd "name" é'
"""The value column's name: quotes, a space and a non-ASCII letter."""

VALUES: dict[str, list[str]] = {
    "BOOLEAN": ["true", "false"],
    "TINYINT": ["-128", "127"],
    "SMALLINT": ["-32768", "32767"],
    "INTEGER": ["-2147483648", "2147483647"],
    "BIGINT": ["-9223372036854775808", "9223372036854775807"],
    "UTINYINT": ["0", "255"],
    "USMALLINT": ["0", "65535"],
    "UINTEGER": ["0", "4294967295"],
    "UBIGINT": ["0", "18446744073709551615", "9223372036854775808"],
    "HUGEINT": [
        "99999999999999999999999999999999999999",
        "-99999999999999999999999999999999999999",
        "9223372036854775808",
        "0",
    ],
    "FLOAT": ["'nan'", "'inf'", "'-inf'", "-0.0", "1e-45", "3.4028235e38", "0.1"],
    "DOUBLE": [
        "'nan'",
        "'inf'",
        "'-inf'",
        "-0.0",
        "5e-324",
        "1.7976931348623157e308",
        "0.1",
    ],
    "DECIMAL(4,1)": ["-999.9", "999.9", "0.0"],
    "DECIMAL(18,3)": ["-999999999999999.999", "0.001"],
    "DECIMAL(38,10)": [
        "9999999999999999999999999999.9999999999",
        "-9999999999999999999999999999.9999999999",
        "0.0000000001",
    ],
    "VARCHAR": ["''", "'é ü 中文 😀'", "'quote '' and \" and \\'", "'NULL'"],
    "BLOB": ["'\\x00\\xFF\\x80abc'::BLOB", "''::BLOB"],
    "DATE": ["'0001-01-01'", "'9999-12-31'", "'1970-01-01'", "'0044-03-15 (BC)'"],
    "TIMESTAMP": [
        "'1970-01-01 00:00:00.000001'",
        "'9999-12-31 23:59:59.999999'",
        "'0001-01-01 00:00:00'",
        "'1969-12-31 23:59:59.999999'",
    ],
    "TIMESTAMP WITH TIME ZONE": [
        "'2024-03-10 02:30:00.123456+05:30'",
        "'1900-01-01 00:00:00+00'",
        "'2038-01-19 03:14:08.000001-08'",
    ],
    "INTEGER[]": ["[1, NULL, -2147483648]", "[]"],
    "VARCHAR[]": ["['a', NULL, '', 'é']", "[]"],
    "UBIGINT[]": ["[18446744073709551615, 0]"],
    "DECIMAL(38,10)[]": ["[9999999999999999999999999999.9999999999, NULL]"],
    "BIGINT[][]": ["[[1, 2], NULL, []]"],
}

UNSUPPORTED = [
    "INTERVAL",
    "INTEGER[3]",
    "INTERVAL[]",
    "STRUCT(a INTEGER)",
    "MAP(VARCHAR, INTEGER)",
    "UUID",
    "TIME",
    "TIME WITH TIME ZONE",
    "UHUGEINT",
    "TIMESTAMP_NS",
    "BIT",
    "ENUM('a', 'b')",
    "JSON",
]


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'Asia/Kolkata'")
    yield connection
    connection.close()


def schema_of(type_: str) -> Schema:
    return Schema((Column("id", "INTEGER"), Column(ODD, type_)))


def fill_source(con: duckdb.DuckDBPyConnection, type_: str, literals: list[str]) -> None:
    con.execute(f"CREATE OR REPLACE TABLE src (id INTEGER, {quote(ODD)} {type_}, {WEIGHT} BIGINT)")
    for i, literal in enumerate([*literals, "NULL"]):
        con.execute(f"INSERT INTO src VALUES ({i}, {literal}, {i - 2})")


def to_arrow(con: duckdb.DuckDBPyConnection, schema: Schema) -> pa.Table:
    return con.sql(to_wire_sql("SELECT * FROM src", schema)).to_arrow_table()


def mismatches(con: duckdb.DuckDBPyConnection, back: str) -> list[tuple]:
    """Rows of ``src`` and ``back`` (joined by id) that differ in value, text or weight."""
    x = quote(ODD)
    return con.execute(
        f"SELECT s.id, b.id, s.{x}::VARCHAR, b.{x}::VARCHAR FROM src AS s "
        f"FULL JOIN ({back}) AS b ON s.id = b.id "
        f"WHERE s.id IS NULL OR b.id IS NULL OR s.{x} IS DISTINCT FROM b.{x} "
        f"OR s.{x}::VARCHAR IS DISTINCT FROM b.{x}::VARCHAR OR s.{WEIGHT} <> b.{WEIGHT}"
    ).fetchall()


@pytest.mark.parametrize("type_", sorted(VALUES))
def test_values_round_trip_exactly(con: duckdb.DuckDBPyConnection, type_: str) -> None:
    schema = schema_of(type_)
    fill_source(con, type_, VALUES[type_])
    wire = conform(to_arrow(con, schema), arrow_schema(schema))
    con.register("wire", wire)
    try:
        back = from_wire_sql("SELECT * FROM wire", schema)
        assert mismatches(con, back) == []
        # the read-back relation has the declared DuckDB types and real names
        described = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {back}").fetchall()]
        assert described == [("id", "INTEGER"), (ODD, type_), (WEIGHT, "BIGINT")]
    finally:
        con.unregister("wire")


@pytest.mark.parametrize("type_", sorted(VALUES))
def test_conform_gives_exactly_the_declared_arrow_schema(
    con: duckdb.DuckDBPyConnection, type_: str
) -> None:
    schema = schema_of(type_)
    fill_source(con, type_, VALUES[type_])
    declared = arrow_schema(schema)
    conformed = conform(to_arrow(con, schema), declared)
    assert conformed.schema.names == ["c0", "c1", WEIGHT]
    assert conformed.schema.types == declared.types
    assert conformed.schema == declared
    assert declared.field(1).type == wire_type(type_).arrow
    assert declared.field(WEIGHT).type == pa.int64()


def test_conform_renames_and_casts_other_arrow_types() -> None:
    schema = Schema((Column("name", "VARCHAR"), Column("n", "INTEGER")))
    table = pa.table(
        {
            "whatever": pa.array(["a", None], type=pa.large_string()),
            "other": pa.array([1, 2], type=pa.int64()),
            "w": pa.array([1, -1], type=pa.int32()),
        }
    )
    conformed = conform(table, arrow_schema(schema))
    assert conformed.schema == arrow_schema(schema)
    assert conformed.to_pydict() == {"c0": ["a", None], "c1": [1, 2], WEIGHT: [1, -1]}


def test_conform_keeps_a_table_that_already_fits() -> None:
    schema = Schema((Column("n", "BIGINT"),))
    table = arrow_schema(schema).empty_table()
    assert conform(table, arrow_schema(schema)).equals(table)


def test_timestamptz_arrives_as_the_same_instant_in_utc(con: duckdb.DuckDBPyConnection) -> None:
    schema = Schema((Column("t", "TIMESTAMP WITH TIME ZONE"),))
    con.execute(f"CREATE OR REPLACE TABLE src (t TIMESTAMPTZ, {WEIGHT} BIGINT)")
    con.execute("INSERT INTO src VALUES ('2024-01-01 05:30:00+05:30', 1)")
    wire = conform(to_arrow(con, schema), arrow_schema(schema))
    assert wire.schema.field("c0").type == pa.timestamp("us", tz="UTC")
    micros = wire.column("c0").cast(pa.int64()).to_pylist()
    assert micros == [1_704_067_200_000_000]  # 2024-01-01 00:00:00 UTC


def test_hugeint_outside_the_carrier_is_refused_not_altered(
    con: duckdb.DuckDBPyConnection,
) -> None:
    schema = schema_of("HUGEINT")
    fill_source(con, "HUGEINT", ["170141183460469231731687303715884105727"])
    with pytest.raises(duckdb.ConversionException):
        to_arrow(con, schema)


def test_unweighted_wire_has_no_weight(con: duckdb.DuckDBPyConnection) -> None:
    schema = schema_of("VARCHAR")
    fill_source(con, "VARCHAR", ["'a'"])
    table = con.sql(to_wire_sql("SELECT * FROM src", schema, weighted=False)).to_arrow_table()
    assert table.schema.names == positional(2) == ["c0", "c1"]


def test_from_wire_reads_named_columns(con: duckdb.DuckDBPyConnection) -> None:
    schema = schema_of("UBIGINT")
    wide = pa.table(
        {
            "__i": pa.array([1, 1], type=pa.int32()),
            "i1_c0": pa.array([7, 8], type=pa.int32()),
            "i1_c1": pa.array([18446744073709551615, None], type=pa.decimal128(20, 0)),
            WEIGHT: pa.array([2, -1], type=pa.int64()),
        }
    )
    con.register("wide", wide)
    try:
        back = from_wire_sql("SELECT * FROM wide", schema, ["i1_c0", "i1_c1"])
        rows = con.execute(f"SELECT id, {quote(ODD)}::VARCHAR, {WEIGHT} FROM ({back})").fetchall()
        types = [r[1] for r in con.execute(f"DESCRIBE {back}").fetchall()]
    finally:
        con.unregister("wide")
    assert sorted(rows) == [(7, "18446744073709551615", 2), (8, None, -1)]
    assert types == ["INTEGER", "UBIGINT", "BIGINT"]


@pytest.mark.parametrize(
    ("type_", "carrier", "spark"),
    [
        ("UTINYINT", "SMALLINT", "smallint"),
        ("USMALLINT", "INTEGER", "int"),
        ("UINTEGER", "BIGINT", "bigint"),
        ("UBIGINT", "DECIMAL(20,0)", "decimal(20,0)"),
        ("HUGEINT", "DECIMAL(38,0)", "decimal(38,0)"),
        ("TIMESTAMP", "TIMESTAMP", "timestamp_ntz"),
        ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "timestamp"),
        ("decimal(12, 2)", "DECIMAL(12, 2)", "decimal(12,2)"),
        ("integer", "INTEGER", "int"),
    ],
)
def test_carriers(type_: str, carrier: str, spark: str) -> None:
    wire = wire_type(type_)
    assert (wire.duckdb, wire.carrier, wire.spark) == (type_, carrier, spark)


def test_numeric_types_are_the_numbers() -> None:
    numeric = {t for t in VALUES if wire_type(t).numeric}
    assert numeric == {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "HUGEINT",
        "FLOAT",
        "DOUBLE",
        "DECIMAL(4,1)",
        "DECIMAL(18,3)",
        "DECIMAL(38,10)",
    }


@pytest.mark.parametrize("type_", UNSUPPORTED)
def test_unsupported_types_are_refused_by_name(type_: str) -> None:
    with pytest.raises(UnsupportedSQL) as error:
        wire_type(type_)
    assert type_ in str(error.value)


@pytest.mark.parametrize("type_", ["INTERVAL", "INTEGER[3]", "STRUCT(a INTEGER)", "UUID"])
def test_unsupported_types_are_refused_by_every_entry_point(type_: str) -> None:
    schema = schema_of(type_)
    for build in (arrow_schema, lambda s: to_wire_sql("SELECT 1", s)):
        with pytest.raises(UnsupportedSQL, match="cannot travel through Spark"):
            build(schema)


def test_wire_types_names_the_relation_and_the_column() -> None:
    schema = Schema((Column("fine", "BIGINT"), Column("when it's", "INTERVAL")))
    with pytest.raises(UnsupportedSQL) as error:
        wire_types(schema, "table 't'")
    message = str(error.value)
    assert message.startswith("table 't', column \"when it's\": ")
    assert "INTERVAL" in message


def test_wire_types_of_supported_columns_in_order() -> None:
    schema = Schema((Column("a", "HUGEINT"), Column("b", "VARCHAR"), Column("c", "DATE")))
    assert [w.arrow for w in wire_types(schema, "x")] == [
        pa.decimal128(38, 0),
        pa.string(),
        pa.date32(),
    ]
