"""Incremental circuits: the operators of one view, and the state they keep.

A circuit is a DAG of operators (``ivm.operators.base``) in dependency order,
output last, each operator once: operators are identified by fingerprint, so
two equal subplans are one operator (and one set of traces). Its traces are
named by the fingerprints of the operators that own them, never by position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ivm.operators.base import Operator, TraceSpec


@dataclass(frozen=True)
class Circuit:
    """The incremental circuit of one view: operators in dependency order, output last."""

    view: str
    operators: tuple[Operator, ...]

    @classmethod
    def of(cls, view: str, output: Operator) -> Circuit:
        """The circuit computing ``output``: every operator below it, inputs first, once."""
        seen: dict[str, Operator] = {}

        def visit(op: Operator) -> None:
            if op.fingerprint in seen:
                return
            for child in op.inputs:
                visit(child)
            seen[op.fingerprint] = op

        visit(output)
        return cls(view, tuple(seen.values()))

    @property
    def output(self) -> Operator:
        """The operator whose change is the view's change."""
        return self.operators[-1]

    @property
    def fingerprint(self) -> str:
        """What the circuit computes: its output operator's fingerprint."""
        return self.output.fingerprint

    def sources(self) -> list[str]:
        """Names of the tables and views the circuit reads."""
        return [n for op in self.operators if (n := op.node.source_name) is not None]

    def traces(self) -> Iterator[tuple[Operator, TraceSpec]]:
        """Every trace the circuit's operators keep, with its owner."""
        for op in self.operators:
            for spec in op.traces():
                yield op, spec

    def consumers(self) -> dict[str, list[Operator]]:
        """The operators reading each operator, by fingerprint."""
        readers: dict[str, list[Operator]] = {op.fingerprint: [] for op in self.operators}
        for op in self.operators:
            for child in op.inputs:
                if op not in readers[child.fingerprint]:
                    readers[child.fingerprint].append(op)
        return readers

    def rewrite(self, step: Callable[[Operator], Operator]) -> Circuit:
        """A new circuit: ``step`` applied to every operator, inputs first, each given
        the operator already rebuilt over its rewritten inputs (this circuit itself when
        nothing changed)."""
        done: dict[str, Operator] = {}
        for op in self.operators:
            inputs = tuple(done[i.fingerprint] for i in op.inputs)
            rebuilt = op if all(a is b for a, b in zip(inputs, op.inputs, strict=True)) else (
                op.with_inputs(inputs)
            )
            done[op.fingerprint] = step(rebuilt)
        output = done[self.output.fingerprint]
        return self if output is self.output else Circuit.of(self.view, output)

    def explain(self, annotate: Callable[[Operator], str] | None = None) -> str:
        """The circuit as an indented tree, output at the top (each operator followed by
        ``annotate(operator)`` when given). An operator read by several others is shown
        in full once; later readers show its number (the text stays linear in the circuit)."""
        lines = [f"view {self.view}: output change consolidated into the view's trace"]
        number = {op.fingerprint: i for i, op in enumerate(self.operators)}
        shown: set[str] = set()

        def show(op: Operator, depth: int) -> None:
            indent = "  " * depth
            if op.fingerprint in shown and op.inputs:
                lines.append(f"{indent}#{number[op.fingerprint]} (shown above)")
                return
            shown.add(op.fingerprint)
            names = ", ".join(op.schema.names)
            line = f"{indent}#{number[op.fingerprint]} {op.label()}  -> [{names}]"
            lines.append(f"{line}  {annotate(op)}" if annotate else line)
            lines.extend(f"{indent}  | {nested}" for nested in op.nested_lines())
            for child in op.inputs:
                show(child, depth + 1)

        show(self.output, 1)
        return "\n".join(lines)
