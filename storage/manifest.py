"""Manifests: what state a view keeps, written down when the state is created.

A manifest names the plan the state was computed for (the circuit's
fingerprint), the engine's state format version, and every trace: where it is
(a table name, or ``<stage>/<table>`` in Spark mode), its columns and its key.
Reopened state is used only when the manifest equals the one the engine
derives from today's plan; otherwise the view's state is rebuilt or refused,
never attached to an operator that did not write it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceEntry:
    """One trace of a view's state."""

    location: str
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type), weight excluded
    key: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    """The state of one view, as the engine that wrote it described it."""

    format: int
    plan: str
    traces: tuple[TraceEntry, ...]

    @classmethod
    def of(cls, format: int, plan: str, traces: Iterable[TraceEntry]) -> Manifest:
        """A manifest with its traces in a canonical order (by location)."""
        return cls(format, plan, tuple(sorted(traces, key=lambda t: t.location)))

    def to_json(self) -> str:
        """The manifest as stored in the catalog."""
        return json.dumps(
            {
                "format": self.format,
                "plan": self.plan,
                "traces": [
                    {"location": t.location, "columns": [list(c) for c in t.columns],
                     "key": list(t.key)}
                    for t in self.traces
                ],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Read a manifest written by ``to_json``."""
        data = json.loads(text)
        return cls.of(
            format=int(data["format"]),
            plan=str(data["plan"]),
            traces=(
                TraceEntry(
                    location=str(t["location"]),
                    columns=tuple((str(n), str(ty)) for n, ty in t["columns"]),
                    key=tuple(str(k) for k in t["key"]),
                )
                for t in data["traces"]
            ),
        )

    def differences(self, other: Manifest) -> list[str]:
        """What differs from ``other``, in words (empty when they are equal)."""
        found = []
        if self.format != other.format:
            found.append(f"state format {self.format} vs {other.format}")
        if self.plan != other.plan:
            found.append(f"plan {self.plan[:12]} vs {other.plan[:12]}")
        if self.traces != other.traces:
            ours = {t.location for t in self.traces}
            theirs = {t.location for t in other.traces}
            changed = sorted(ours ^ theirs) or ["trace columns or keys"]
            found.append("traces differ: " + ", ".join(changed[:4]))
        return found
