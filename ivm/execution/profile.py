"""Where an epoch's time went: per phase, per view and per operator (``explain(analyze=True)``).

An operator's own time is that of the statements it runs itself (its
materialized steps). A linear operator (filter, project, UNION ALL, a join's
delta rules…) has none: its SQL is text inside its consumer's statement, so
its time is part of that consumer's, and ``explain`` says "fused".

In Spark mode operators run in Spark stages: each stage's tasks count the rows they
emit and their seconds, recorded under the stage's operator (``statements``: its tasks).

A profile goes into the state with its epoch (``to_json``, ``views.relation_times``),
so a later session explains the last committed epoch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

OUTPUT = "output"
"""The key under which a view's own statement (its change's consolidation) is recorded."""


@dataclass
class OperatorStats:
    """One operator's statements in one epoch: how many, their time, the rows they wrote."""

    statements: int = 0
    seconds: float = 0.0
    rows: int = 0


@dataclass
class EpochProfile:
    """The timings of one epoch (or a view's backfill)."""

    epoch: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per phase of the epoch, in the order they ran."""
    views: dict[str, float] = field(default_factory=dict)
    """Seconds computing each view's change (its operators and its consolidation)."""
    strategies: dict[str, str] = field(default_factory=dict)
    """How each changed view's change was computed."""
    operators: dict[tuple[str, str], OperatorStats] = field(default_factory=dict)
    """Each operator's statements, by (view, operator fingerprint)."""
    changed: set[tuple[str, str]] = field(default_factory=set)
    """The operators that had a change, by (view, operator fingerprint)."""
    lookups: float = 0.0
    """Seconds spent reading arrangements at keys (hashing the keys, searching, taking)."""
    per_operator: bool = True
    """False where operators run remotely (Spark): only stages' rows and times are known."""
    tables: dict[str, float] = field(default_factory=dict)
    """Seconds applying each changed table's change (embedded: checking it; Spark: its stage)."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows of each changed table's batch and each changed view's consolidated change."""
    recorded: bool = False
    """True when read back from the state (a session opened after the epoch)."""

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (added to earlier time of that phase)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def record(self, view: str, fingerprint: str, seconds: float, rows: int) -> None:
        """Count one statement of an operator."""
        stats = self.operators.setdefault((view, fingerprint), OperatorStats())
        stats.statements += 1
        stats.seconds += seconds
        stats.rows += rows

    def output(self, view: str) -> str:
        """The view's own statement (consolidating its change), for ``explain``."""
        stats = self.operators.get((view, OUTPUT))
        if stats is None:
            return ""
        return f"  [{stats.seconds * 1000:.2f} ms, {stats.rows:,} rows]"

    def total(self) -> float:
        """Seconds of every phase together."""
        return sum(self.phases.values())

    def summary(self, view: str) -> str:
        """The epoch's phases and the view's share, for ``explain``."""
        phases = ", ".join(f"{name} {seconds * 1000:.1f}" for name, seconds in self.phases.items())
        recorded = " (recorded in the state: phases up to its commit)" if self.recorded else ""
        lines = [
            f"last epoch {self.epoch}{recorded}: {self.total() * 1000:.1f} ms ({phases}; ms)"
        ]
        if view in self.views:
            strategy = self.strategies.get(view, "incremental")
            lines.append(
                f"this view: {self.views[view] * 1000:.1f} ms computing its change "
                f"(strategy: {strategy})"
            )
        else:
            lines.append("this view: not changed by the last epoch")
        return "\n".join(lines)

    def annotation(self, view: str, fingerprint: str) -> str:
        """What one operator did in this epoch, for ``explain``."""
        stats = self.operators.get((view, fingerprint))
        if not self.per_operator:
            if stats is not None:
                return (
                    f"[spark stage: {stats.seconds * 1000:.2f} ms in {stats.statements} task"
                    f"{'s' if stats.statements != 1 else ''}, {stats.rows:,} rows out]"
                )
            return "[in the view's Spark job]" if view in self.views else "[no change]"
        changed = (view, fingerprint) in self.changed
        if stats is not None:
            return (
                f"[{stats.seconds * 1000:.2f} ms, {stats.statements} statement"
                f"{'s' if stats.statements != 1 else ''}, {stats.rows:,} rows]"
            )
        return "[fused into its consumer's statement]" if changed else "[no change]"

    def to_json(self) -> str:
        """The profile as JSON text (``from_json`` reads it back)."""
        return json.dumps({
            "epoch": self.epoch, "phases": list(self.phases.items()), "views": self.views,
            "strategies": self.strategies, "tables": self.tables, "rows": self.rows,
            "operators": [[v, f, s.statements, s.seconds, s.rows]
                          for (v, f), s in self.operators.items()],
            "changed": sorted(self.changed), "lookups": self.lookups,
            "per_operator": self.per_operator,
        })

    @classmethod
    def from_json(cls, text: str) -> EpochProfile:
        """The profile ``to_json`` wrote, marked ``recorded``."""
        data = json.loads(text)
        return cls(
            epoch=int(data["epoch"]), phases=dict(data["phases"]), views=data["views"],
            strategies=data["strategies"], tables=data["tables"], rows=data["rows"],
            operators={(v, f): OperatorStats(n, s, r) for v, f, n, s, r in data["operators"]},
            changed={(v, f) for v, f in data["changed"]}, lookups=data["lookups"],
            per_operator=data["per_operator"], recorded=True,
        )
