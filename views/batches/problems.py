"""Reporting bad input: which Arrow errors mean "bad batch", and the first offending row."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import SchemaError

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)
"""What pyarrow raises when values do not convert; the batch's fault, not ivm's."""


def fail_at_first(mask: pa.ChunkedArray | pa.Array, message: Callable[[int], str]) -> None:
    """Raise SchemaError(message(i)) for the first row i where mask is true."""
    index = pc.index(pc.fill_null(mask, False), True).as_py()
    if index >= 0:
        raise SchemaError(message(index))


def show(value: pa.Scalar) -> str:
    """A change code for a message: quoted, or NULL."""
    return "NULL" if value.as_py() is None else repr(value.as_py())
