"""The Arrow tables an epoch hands to DuckDB by name (its batches, looked-up slices, rows
stepped in memory), and their release once its transaction is over.

Registering an Arrow table is a statement (a temporary view over it), and so is taking
it back. An epoch names its tables by their position in it (``__ivm_mem3``), not by the
epoch, so the next epoch's table of that position replaces it without a statement of
its own: ``release`` takes back only the tables large enough to be worth the memory
(``KEEP_BYTES``), and leaves the small ones registered until they are replaced (a small
epoch registers 3–7 of them: as many statements saved). A registered table is read only
by the statements of the epoch that registered it; one rolled back leaves DuckDB the
table registered before it, which nothing reads either.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

KEEP_BYTES = 1 << 20
"""Tables of at most this many bytes stay registered after their epoch, until replaced."""


class Registrations:
    """The tables one connection's epoch has registered, in order."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.names: list[str] = []
        self._large: list[str] = []

    def register(self, prefix: str, rows: pa.Table) -> str:
        """Register ``rows`` under ``prefix`` and their position; the name given them."""
        name = f"{prefix}{len(self.names)}"
        self.con.register(name, rows)
        self.names.append(name)
        if rows.nbytes > KEEP_BYTES:
            self._large.append(name)
        return name

    def release(self) -> None:
        """After the epoch's transaction (DuckDB refuses it inside one that failed): take
        back the large tables; the small ones stay until the next epoch replaces them."""
        for name in self._large:
            self.con.unregister(name)
        self.names.clear()
        self._large.clear()

    def __len__(self) -> int:
        return len(self.names)
