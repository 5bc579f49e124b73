"""128-bit integers as numpy words: the running sums of exact aggregates, added in memory.

DuckDB keeps exact sums as 128-bit integers: ``DECIMAL(38, s)`` (a SUM over decimals)
and ``HUGEINT`` (a SUM over integers). Arrow holds both as 16 little-endian bytes per
value (``decimal128``; HUGEINT as DuckDB's opaque extension type over
``fixed_size_binary(16)``), which numpy sees as two 64-bit words: the low word unsigned,
the high word signed (two's complement). ``Wide`` adds such numbers word by word with
the carry, and says when a sum leaves the range its type can hold, as DuckDB would
refuse it, so nothing wraps silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

WORD = 2**64


@dataclass(frozen=True)
class Wide:
    """128-bit integers: ``value = high · 2⁶⁴ + low`` (``low`` uint64, ``high`` int64)."""

    low: np.ndarray
    high: np.ndarray

    def __len__(self) -> int:
        return len(self.low)

    @classmethod
    def zeros(cls, length: int) -> Wide:
        """``length`` zeros."""
        return cls(np.zeros(length, np.uint64), np.zeros(length, np.int64))

    @classmethod
    def of(cls, array: pa.Array | pa.ChunkedArray) -> Wide:
        """The values of a decimal128 or HUGEINT array, NULL read as 0."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        storage = array.storage if isinstance(array, pa.ExtensionArray) else array
        words = np.frombuffer(storage.buffers()[1], dtype=np.uint64)
        words = words[2 * storage.offset : 2 * (storage.offset + len(storage))]
        low, high = words[0::2].copy(), words[1::2].view(np.int64).copy()
        if storage.null_count:
            null = ~np.asarray(storage.is_valid().to_numpy(zero_copy_only=False), bool)
            low[null] = 0
            high[null] = 0
        return cls(low, high)

    def scattered(self, positions: np.ndarray, length: int) -> Wide:
        """``length`` numbers: these at ``positions``, zero elsewhere."""
        out = Wide.zeros(length)
        out.low[positions] = self.low
        out.high[positions] = self.high
        return out

    def take(self, positions: np.ndarray) -> Wide:
        """The numbers at ``positions``."""
        return Wide(self.low[positions], self.high[positions])

    def plus(self, other: Wide) -> tuple[Wide, np.ndarray]:
        """The sums, and where the sum wrapped past 2¹²⁷ (a wrong sum)."""
        low = self.low + other.low
        carry = (low < self.low).astype(np.int64)
        with np.errstate(over="ignore"):
            high = self.high + other.high + carry
        wrapped = ((self.high < 0) == (other.high < 0)) & ((high < 0) != (self.high < 0))
        return Wide(low, high), wrapped

    def beyond(self, bound: int) -> np.ndarray:
        """Where ``|value| >= bound`` (``0 < bound < 2¹²⁷``)."""
        high_b, low_b = divmod(bound, WORD)
        neg_high, neg_low = divmod(-bound, WORD)
        too_high = (self.high > high_b) | ((self.high == high_b) & (self.low >= np.uint64(low_b)))
        too_low = (self.high < neg_high) | (
            (self.high == neg_high) & (self.low <= np.uint64(neg_low))
        )
        return too_high | too_low

    def shifted_right(self, bits: int) -> Wide:
        """``floor(value / 2^bits)`` (``0 < bits < 64``): an arithmetic shift."""
        low = (self.low >> np.uint64(bits)) | (
            self.high.view(np.uint64) << np.uint64(64 - bits)
        )
        return Wide(low, self.high >> np.int64(bits))

    def shifted_left(self, bits: int) -> Wide:
        """``value · 2^bits`` (``0 < bits < 64``; the caller keeps it below 2¹²⁷)."""
        high = (self.high.view(np.uint64) << np.uint64(bits)) | (
            self.low >> np.uint64(64 - bits)
        )
        return Wide(self.low << np.uint64(bits), high.view(np.int64))

    def low_bits(self, bits: int) -> Wide:
        """``value mod 2^bits`` (``0 < bits < 64``), never negative."""
        return Wide(self.low & np.uint64(2**bits - 1), np.zeros(len(self), np.int64))

    def nonzero(self) -> np.ndarray:
        """Where the value is not zero."""
        return (self.low != 0) | (self.high != 0)

    def nearest_float(self) -> np.ndarray:
        """The numbers as DOUBLE, each the nearest one (ties to even), as Python's
        ``float(int)`` and DuckDB's cast of a HUGEINT round (|value| < 2¹²⁷)."""
        negative = self.high < 0
        high, low = self.high.view(np.uint64), self.low
        negated_low = ~low + np.uint64(1)
        negated_high = ~high + (negated_low == 0).astype(np.uint64)
        high = np.where(negative, negated_high, high)
        low = np.where(negative, negated_low, low)
        length = np.where(high > 0, 64 + _bit_length(high), _bit_length(low))
        # Above 53 bits: keep the top 54 (53 and a rounding bit) and whether any below
        # them is set, then round to nearest, ties to even, in integers.
        shift = np.maximum(length - 54, 0).astype(np.uint64)
        far = shift >= 64
        near_shift = np.where(far, 0, shift)
        far_shift = np.where(far, shift - np.uint64(64), 0)
        up = np.where(near_shift == 0, 0, np.uint64(64) - near_shift) % np.uint64(64)
        near = (low >> near_shift) | np.where(near_shift == 0, 0, high << up)
        near_sticky = (low & ((np.uint64(1) << near_shift) - np.uint64(1))) != 0
        top = np.where(far, high >> far_shift, near)
        far_sticky = (low != 0) | ((high & ((np.uint64(1) << far_shift) - np.uint64(1))) != 0)
        sticky = np.where(far, far_sticky, near_sticky)
        half, rest = top >> np.uint64(1), top & np.uint64(1)
        carry = (rest == 1) & (sticky | ((half & np.uint64(1)) == 1))
        rounded = np.ldexp((half + carry.astype(np.uint64)).astype(np.float64),
                           (shift.astype(np.int64) + 1).astype(np.int32))
        exact = low.astype(np.float64)  # below 2^53: exact
        values = np.where(length > 53, rounded, exact)
        return np.where(negative, -values, values)

    def to_float(self) -> np.ndarray:
        """The numbers as DOUBLE, rounded as DuckDB casts a HUGEINT (to nearest: the
        words are added in extended precision, where the platform has it)."""
        wide = self.high.astype(np.longdouble) * np.longdouble(WORD)
        return (wide + self.low.astype(np.longdouble)).astype(np.float64)

    def array(self, type_: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
        """An Arrow array of ``type_`` (decimal128, or an extension type over
        fixed_size_binary(16)) holding the numbers; NULL where ``valid`` is False."""
        words = np.empty(2 * len(self), np.uint64)
        words[0::2] = self.low
        words[1::2] = self.high.view(np.uint64)
        bitmap = None
        nulls = 0
        if valid is not None and not bool(valid.all()):
            bitmap = pa.array(valid, pa.bool_()).buffers()[1]
            nulls = int(len(valid) - np.count_nonzero(valid))
        storage_type = type_.storage_type if isinstance(type_, pa.BaseExtensionType) else type_
        storage = pa.Array.from_buffers(
            storage_type, len(self), [bitmap, pa.py_buffer(words)], null_count=nulls
        )
        if isinstance(type_, pa.BaseExtensionType):
            return pa.ExtensionArray.from_storage(type_, storage)
        return storage


def is_wide(type_: pa.DataType) -> bool:
    """Whether Arrow ``type_`` holds 128-bit integers ``Wide`` reads: decimal128 or
    DuckDB's HUGEINT (an extension type over fixed_size_binary(16))."""
    if pa.types.is_decimal128(type_):
        return True
    storage = type_.storage_type if isinstance(type_, pa.BaseExtensionType) else None
    return (
        storage is not None
        and pa.types.is_fixed_size_binary(storage)
        and storage.byte_width == 16
        and getattr(type_, "type_name", None) == "hugeint"
    )


def _bit_length(words: np.ndarray) -> np.ndarray:
    """Each uint64's bit length (0 for 0)."""
    _, exponent = np.frexp(words.astype(np.float64))  # may round up to the next power
    length = np.minimum(exponent, 64).astype(np.int64)
    shift = np.maximum(length - 1, 0).astype(np.uint64)
    over = (length > 0) & ((words >> shift) == 0)
    return length - over
