"""Spark's types of the values ivm sends between stages (``ivm.execution.spark.wire``)."""

from __future__ import annotations

import re

from pyspark.sql import types as T

from ivm.execution.spark.wire import WireType, wire_types
from ivm.schema import WEIGHT, Schema

_SPARK_TYPES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(),
    "tinyint": T.ByteType(),
    "smallint": T.ShortType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "timestamp": T.TimestampType(),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def spark_type(wire: WireType) -> T.DataType:
    """The Spark type of a wire type."""
    return _spark_type(wire.spark)


def _spark_type(name: str) -> T.DataType:
    if name.startswith("array<") and name.endswith(">"):
        return T.ArrayType(_spark_type(name[len("array<") : -1]), True)
    match = _DECIMAL.fullmatch(name)
    if match:
        return T.DecimalType(int(match[1]), int(match[2]))
    return _SPARK_TYPES[name]


def spark_struct(
    schema: Schema, names: list[str] | None = None, weighted: bool = True
) -> T.StructType:
    """Spark schema of ``schema`` on the wire: positional names (or ``names``), then ``__w``."""
    wires = wire_types(schema, "a relation")
    names = names if names is not None else [f"c{j}" for j in range(len(wires))]
    fields = [T.StructField(n, spark_type(w), True) for n, w in zip(names, wires, strict=True)]
    if weighted:
        fields.append(T.StructField(WEIGHT, T.LongType(), True))
    return T.StructType(fields)
