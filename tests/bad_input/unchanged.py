"""What "nothing changed" means, checked the same way by every case: every table's and
view's contents (each row as text, so NaN equals NaN), the names of the tables and views,
and the epoch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def rows_as_text(table: Any) -> list[str]:
    """An Arrow table's rows as sorted text (NaN compares equal to itself as text)."""
    return sorted(repr(tuple(row.values())) for row in table.to_pylist())


@dataclass(frozen=True)
class State:
    """A session's observable state: epoch, and contents by table and view name."""

    epoch: int
    tables: dict[str, list[str]]
    views: dict[str, list[str]]


def capture(db: Any) -> State:
    """``db``'s state now, read in one query (every row as text, sorted per relation)."""
    names = [*db.tables, *db.views]
    parts = [f"SELECT {i} AS i, list(CAST(x AS VARCHAR) ORDER BY CAST(x AS VARCHAR)) AS r "
             f"FROM {_quoted(name)} AS x" for i, name in enumerate(names)]
    found = {row["i"]: row["r"] for row in db.sql(" UNION ALL ".join(parts)).to_pylist()} \
        if parts else {}
    contents = {name: found[i] for i, name in enumerate(names)}
    return State(epoch=db.epoch, tables={n: contents[n] for n in db.tables},
                 views={n: contents[n] for n in db.views})


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def assert_unchanged(db: Any, before: State) -> State:
    """Fail unless ``db`` is exactly as ``before`` was captured; returns the state."""
    after = capture(db)
    assert after.epoch == before.epoch, f"epoch moved: {before.epoch} -> {after.epoch}"
    assert list(after.tables) == list(before.tables), "the tables changed"
    assert list(after.views) == list(before.views), "the views changed"
    for kind, old, new in (("table", before.tables, after.tables),
                           ("view", before.views, after.views)):
        for name in old:
            assert new[name] == old[name], f"{kind} {name!r} changed"
    return after


def assert_views_recompute(db: Any) -> None:
    """Every view holds what DuckDB computes from its SQL over the tables now."""
    for name, view in db.views.items():
        assert rows_as_text(db.read(name)) == rows_as_text(db.sql(view.sql)), name
