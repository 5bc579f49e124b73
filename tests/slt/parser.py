"""Read sqllogictest scripts: ``statement ok|error`` and ``query <types> <sort> [label]``
records (results, when present, are skipped: the oracle here is DuckDB itself).

The format is SQLite's (https://www.sqlite.org/sqllogictest): records are separated by
blank lines; a record may be preceded by ``skipif <db>`` / ``onlyif <db>`` lines;
``hash-threshold n`` and ``halt`` are control lines; ``#`` starts a comment line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Record:
    """One statement or query of a script."""

    kind: str
    """``statement`` or ``query``."""
    sql: str
    line: int
    expect_error: bool = False
    types: str = ""
    sort: str = ""
    label: str = ""
    skipif: tuple[str, ...] = field(default=())
    onlyif: tuple[str, ...] = field(default=())

    def runs_on(self, engine: str = "sqlite") -> bool:
        """Whether the script means this record for ``engine`` (SQLite's conditions)."""
        if engine in self.skipif:
            return False
        return not self.onlyif or engine in self.onlyif


def read_text(path: Path) -> str:
    """A script's text (``.gz`` files decompressed), line ends normalized."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n")


def parse(text: str, engine: str = "sqlite") -> Iterator[Record]:
    """The records of a script, in order (a ``halt`` meant for ``engine`` ends it)."""
    lines = text.split("\n")
    i, n = 0, len(lines)
    skipif: list[str] = []
    onlyif: list[str] = []
    while i < n:
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        words = line.split()
        head = words[0]
        if head == "halt":
            if engine not in skipif and (not onlyif or engine in onlyif):
                return
            skipif, onlyif = [], []
            continue
        if head in ("skipif", "onlyif"):
            (skipif if head == "skipif" else onlyif).append(words[1] if len(words) > 1 else "")
            continue
        if head not in ("statement", "query"):
            skipif, onlyif = [], []  # hash-threshold and other control lines
            continue
        start = i
        body = []
        while i < n and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        while i < n and lines[i].strip():  # the results, if any
            i += 1
        sql = "\n".join(body).strip()
        if head == "statement":
            yield Record("statement", sql, start, expect_error=words[1:2] == ["error"],
                         skipif=tuple(skipif), onlyif=tuple(onlyif))
        else:
            yield Record("query", sql, start, types=words[1] if len(words) > 1 else "",
                         sort=words[2] if len(words) > 2 else "",
                         label=words[3] if len(words) > 3 else "",
                         skipif=tuple(skipif), onlyif=tuple(onlyif))
        skipif, onlyif = [], []


def strip_results(text: str, every: int = 1) -> str:
    """The script without query results, keeping every ``every``-th query (all
    statements): how the committed corpus was cut (see ``curate.py``)."""
    out: list[str] = []
    pending: list[str] = []
    queries = 0
    lines = text.replace("\r\n", "\n").split("\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        i += 1
        word = line.split()[0] if line.strip() else ""
        if word in ("skipif", "onlyif"):
            pending.append(line)
            continue
        if word not in ("statement", "query"):
            out += pending + [line]
            pending = []
            continue
        body = [line]
        while i < n and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        while i < n and lines[i].strip():
            i += 1
        keep = word == "statement" or queries % every == 0
        if word == "query":
            queries += 1
        if keep:
            out += pending + body
        pending = []
    text = "\n".join(out)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text
