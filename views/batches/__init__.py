"""Batches: turn what a caller hands to ``ingest`` into a Z-set for one base table.

A Z-set batch holds the base table's columns plus the weight column ``__w``: row
``r`` with weight ``w`` means "``w`` copies of ``r`` were inserted" when ``w > 0``
and "``-w`` copies were deleted" when ``w < 0``. ``normalize_batch`` reads the change
kind from the batch's columns (API.md, "Batches"):

- only the table's columns: every row is inserted (weight +1);
- ``__w``: an integer weight per row;
- ``op`` with ``before``/``after`` structs (Debezium envelope): ``c``/``r`` insert
  ``after``, ``d`` deletes ``before``, ``u`` deletes ``before`` then inserts ``after``;
  every other envelope column (``source``, ``ts_ms``…) is ignored;
- ``_change_type`` (Delta Lake change data feed): ``insert``/``update_postimage``
  weigh +1, ``delete``/``update_preimage`` weigh -1; ``_commit_version`` and
  ``_commit_timestamp`` are ignored.

The result has one row per change (a ``u`` gives two, the delete first), in input
order, without rows of weight 0; it is not consolidated. Columns are matched by
name (exactly, else case-insensitively, as DuckDB identifiers are) and cast to the
table's Arrow types only when no value can change; see ``casts.castable``.

The work is columnar (pyarrow compute). Only a list of dicts is walked in Python,
to check its keys and build its columns, as ``pa.Table.from_pylist`` would.

Modules, in the order a batch meets them:

- ``reading``: the caller's object (Arrow, pandas, list of dicts) as an Arrow table;
- ``formats``: which change format its columns follow, and the formats' control columns;
- ``inserts``, ``weighted``, ``debezium``, ``delta``: one reader per format;
- ``columns``: the batch's columns matched to the table's, by name;
- ``kinds`` and ``casts``: families of Arrow types, and casts that lose nothing;
- ``zsets``: building the result; ``required``: primary-key and NOT NULL checks;
- ``problems``: pointing at the offending row or value in an error.
"""

from __future__ import annotations

from ivm.views.batches.normalize import normalize_batch

__all__ = ["normalize_batch"]
