"""How a session finds a table or view by the name a user gives it.

DuckDB names ignore case, so ``Orders`` finds the table created as ``orders``; the name
is then used as it was stored. A mixin of ``views.session.Session``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm.errors import SqlError
from ivm.schema import Schema

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


class Names(_Base):
    """Name resolution of the session's tables and views."""

    _committed_names: frozenset[str] = frozenset()
    """The tables and views as the last commit left them: what a read may see."""

    def _published(self) -> None:
        """After a DDL committed (and once opened): its tables and views are readable."""
        self._committed_names = frozenset([*self._tables, *self._views])

    def _readable(self, name: str) -> str:
        """The stored spelling of a table or view of the last commit; SqlError if none. A
        read on another thread never sees a DDL in flight: not a view it is creating, and
        still one it is dropping (``views.concurrency``)."""
        if not isinstance(name, str):
            raise SqlError(f"a table or view name is text, not {type(name).__name__} {name!r}")
        committed = self._committed_names
        if name in committed:
            return name
        for known in committed:
            if known.lower() == name.lower():
                return known
        raise SqlError(f"no table or view named {name!r}")

    def _resolve(self, name: str) -> str:
        """The stored spelling of a table or view name (DuckDB names ignore case)."""
        if not isinstance(name, str):
            raise SqlError(f"a table or view name is text, not {type(name).__name__} {name!r}")
        if name in self._tables or name in self._views:
            return name
        for known in [*self._tables, *self._views]:
            if known.lower() == name.lower():
                return known
        return name

    def _known(self, name: str) -> str:
        """The stored spelling of an existing table or view; SqlError if there is none."""
        name = self._resolve(name)
        if name not in self._views and name not in self._tables:
            raise SqlError(f"no table or view named {name!r}")
        return name

    def _schema_of(self, name: str) -> Schema:
        """The schema of table or view ``name``."""
        if name in self._tables:
            return self._tables[name].schema
        return self._views[name].schema
