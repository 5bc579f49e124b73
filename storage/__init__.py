"""Storage: traces and view outputs as DuckDB tables, the catalog, epochs.

Knows DuckDB tables, not operators.
"""
