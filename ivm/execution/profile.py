"""Where an epoch's time went: per phase, per view and per operator (``explain(analyze=True)``).

An operator's own time is that of the statements it runs itself (its
materialized steps). A linear operator (filter, project, UNION ALL, a join's
delta rules…) has none: its SQL is text inside its consumer's statement, so
its time is part of that consumer's, and ``explain`` says "fused".
"""

from __future__ import annotations

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
    """False where operators run remotely (Spark): only views' times are known."""

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
        lines = [f"last epoch {self.epoch}: {self.total() * 1000:.1f} ms ({phases}; ms)"]
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
        if not self.per_operator:
            return "[in the view's Spark job]" if view in self.views else "[no change]"
        stats = self.operators.get((view, fingerprint))
        changed = (view, fingerprint) in self.changed
        if stats is not None:
            return (
                f"[{stats.seconds * 1000:.2f} ms, {stats.statements} statement"
                f"{'s' if stats.statements != 1 else ''}, {stats.rows:,} rows]"
            )
        return "[fused into its consumer's statement]" if changed else "[no change]"
