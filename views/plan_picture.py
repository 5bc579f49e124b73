"""A picture of a view's plan: Graphviz DOT, rendered to SVG or PNG where ``dot`` is installed.

``db.explain(view, format="dot")`` draws the view's incremental circuit: one box per
operator (its label and columns; with ``analyze=True``, what it did in the last
epoch: time, statements and rows), data flowing upward from the sources to the
view; each arrangement the view reads (an in-memory index of a trace by a key, with
its entries and size, and every view sharing it), attached to the source of its
trace; in Spark mode, each stage as a cluster around the operator whose change it
emits, with its partitioning. ``format="svg"`` or ``"png"`` runs Graphviz's ``dot``
(an optional system package: ``apt install graphviz`` / ``brew install graphviz``)
and returns the picture's bytes.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from ivm.circuit.circuit import Circuit
from ivm.errors import IvmError
from ivm.execution.arrangements import ArrangementSize
from ivm.execution.profile import EpochProfile
from ivm.operators.scan import Source
from ivm.storage.naming import TableNames, unquote

FORMATS = ("text", "dot", "svg", "png")
"""What ``explain(format=)`` accepts."""


def dot_source(
    view: str,
    circuit: Circuit,
    profile: EpochProfile | None,
    arrangements: Sequence[ArrangementSize],
    names: TableNames,
    stages: Sequence[tuple[str, str | None]] = (),
) -> str:
    """The DOT text of the picture (``profile``: annotate operators with the last epoch;
    ``stages``: Spark stages as (description, fingerprint of the operator it emits))."""
    lines = [
        f"digraph {_quote('ivm ' + view)} {{",
        "  rankdir=BT;",
        '  node [shape=box, style="rounded,filled", fillcolor="#f4f6fb", fontname="Helvetica",'
        " fontsize=10];",
        '  edge [color="#5b6b8c"];',
        f'  label={_quote(f"view {view}" + (_summary(profile, view) if profile else ""))};',
        '  labelloc=t; fontname="Helvetica";',
        f'  output [shape=doubleoctagon, fillcolor="#dff0d8", label={_quote("view " + view)}];',
    ]
    number = {op.fingerprint: i for i, op in enumerate(circuit.operators)}
    produced = {fingerprint: text for text, fingerprint in stages if fingerprint}
    for op in circuit.operators:
        i = number[op.fingerprint]
        label = f"#{i} {op.label()}\\n[{', '.join(op.schema.names)}]"
        if profile is not None:
            label += "\\n" + profile.annotation(view, op.fingerprint)
        node = f"  op{i} [label={_quote(label, escaped=True)}];"
        if op.fingerprint in produced:
            lines += [f"  subgraph cluster_op{i} {{", '    style=dashed; color="#c77d00";',
                      f"    label={_quote('spark stage ' + produced[op.fingerprint])};",
                      f"  {node}", "  }"]
        else:
            lines.append(node)
        for child in op.inputs:
            lines.append(f"  op{number[child.fingerprint]} -> op{i};")
    lines.append(f"  op{number[circuit.output.fingerprint]} -> output;")
    sources = {op.name: number[op.fingerprint] for op in circuit.operators
               if isinstance(op, Source)}
    for j, size in enumerate(s for s in arrangements if view in s.readers):
        shared = ", ".join(size.readers)
        text = (f"arrangement of {names.describe(size.table)}\\nby ({', '.join(size.key)}): "
                f"{size.entries:,} entries, {size.bytes / 1e6:,.1f} MB\\nread by {shared}")
        lines.append(f'  arr{j} [shape=cylinder, fillcolor="#fdf2d0", '
                     f"label={_quote(text, escaped=True)}];")
        reader = _reader(size.table, names, sources, circuit, number)
        if reader is not None:
            lines.append(f"  arr{j} -> op{reader} [style=dotted, arrowhead=none];")
    lines.append("}")
    return "\n".join(lines)


def _reader(
    table: str, names: TableNames, sources: dict[str, int], circuit: Circuit,
    number: dict[str, int],
) -> int | None:
    """The operator an arrangement of ``table`` belongs to: the source of a relation's
    trace, or the operator keeping an operator trace (its fingerprint ends the name)."""
    relation = names.describe(table).removeprefix("the rows of ").strip("'")
    if relation in sources:
        return sources[relation]
    prefix = unquote(table).rsplit("-", 1)[-1]
    owners = [op for op in circuit.operators if prefix and op.fingerprint.startswith(prefix)]
    return number[owners[0].fingerprint] if owners else None


def render(source: str, format: str) -> bytes:
    """The DOT ``source`` drawn as ``format`` (svg or png) by Graphviz's ``dot``."""
    program = shutil.which("dot")
    if program is None:
        raise IvmError(
            f"explain(format={format!r}) needs Graphviz's dot program on the PATH (apt install "
            "graphviz, brew install graphviz); format='dot' gives the picture's source"
        )
    done = subprocess.run(
        [program, f"-T{format}"], input=source.encode(), capture_output=True, timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise IvmError(f"Graphviz's dot failed: {done.stderr.decode(errors='replace')[:500]}")
    return done.stdout


def _summary(profile: EpochProfile, view: str) -> str:
    seconds = profile.views.get(view)
    timing = f"{seconds * 1000:,.1f} ms" if seconds is not None else "not run"
    return f" (epoch {profile.epoch}: {timing})"


def _quote(text: str, escaped: bool = False) -> str:
    """A DOT string; ``escaped``: its ``\\n`` line breaks are kept as DOT's."""
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    if escaped:
        body = body.replace("\\\\n", "\\n")
    return f'"{body}"'
