"""What ``Session.explain`` prints: a view's circuit, and with ``analyze`` the last epoch's
profile and the arrangements the view reads."""

from __future__ import annotations

from collections.abc import Sequence

from ivm.circuit.circuit import Circuit
from ivm.execution.arrangements import ArrangementSize
from ivm.execution.profile import EpochProfile
from ivm.storage.naming import TableNames


def explain_text(
    view: str,
    circuit: Circuit,
    profile: EpochProfile | None,
    arrangements: Sequence[ArrangementSize],
    names: TableNames,
) -> str:
    """The analyzed explanation of ``view`` (``profile``: the last epoch's, if any)."""
    if profile is None:
        return circuit.explain() + "\nno epoch has run since this session opened"
    header, tree = circuit.explain(lambda op: profile.annotation(view, op.fingerprint)).split(
        "\n", 1
    )
    text = f"{profile.summary(view)}\n{header}{profile.output(view)}\n{tree}"
    return text + "".join(f"\n{line}" for line in arrangement_lines(view, arrangements, names))


def arrangement_lines(
    view: str, arrangements: Sequence[ArrangementSize], names: TableNames
) -> list[str]:
    """What ``explain(analyze=True)`` says of the arrangements ``view`` reads."""
    sizes = [s for s in arrangements if view in s.readers]
    if not sizes:
        return []
    lines = ["arrangements read (in memory; one per trace and key, shared):"]
    for size in sorted(sizes, key=lambda s: (s.table, s.key)):
        readers = ", ".join(repr(r) for r in size.readers)
        lines.append(
            f"  {names.describe(size.table)} by ({', '.join(size.key)}): "
            f"{size.entries:,} entries, {size.bytes / 1e6:,.1f} MB; read by {readers}"
        )
    return lines
