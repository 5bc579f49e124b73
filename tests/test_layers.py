"""Dependencies point down only (DESIGN.md, "Layers"), and only the Spark code imports pyspark.

Every .py file of the installed package is read with ``ast`` (module-level and nested
imports alike, ``TYPE_CHECKING`` blocks included: a type is a dependency too) and mapped
to the module name it installs as, through pyproject's ``package-dir``. A module may
import its own layer or lower ones; inside the engine, its own sub-layer or lower ones.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("ivm.errors", (0,)),
    ("ivm.guard", (0,)),  # the public API's guard: only IvmError leaves it
    ("ivm.faults", (0,)),  # fault points: tests make the process die or I/O fail there
    ("ivm.storage", (1,)),  # knows DuckDB tables and files
    # The engine, lowest first.
    ("ivm.schema", (2, 0)),
    ("ivm.plan", (2, 1)),
    ("ivm.functions", (2, 2)),
    ("ivm.operators", (2, 3)),
    ("ivm.circuit", (2, 4)),
    ("ivm.passes", (2, 5)),
    ("ivm.execution", (2, 6)),
    ("ivm.sql_frontend", (3,)),
    ("ivm.views", (4,)),
    # The public face beside the package itself: sinks and sources re-exported from views.
    ("ivm.sinks", (5,)),
    ("ivm.sources", (5,)),
)
"""Each layer's module prefix and rank, lowest first; ``ivm`` itself (the public face,
its ``__init__``) ranks above all of them and may import anything."""

TOP = (5,)
"""The rank of the package ``ivm`` itself."""

SPARK_ONLY = ("pyspark", "py4j")
"""Top-level names that only the Spark subpackages may import."""

SPARK_PACKAGES = ("ivm.execution.spark", "ivm.views.spark")

FOLDER_NAMES = ("sql_frontend", "storage", "views")
"""Repository folders that install under ``ivm``: importing them by the folder name
works only from the repository root, and there it may find a user's file instead."""


@dataclass(frozen=True)
class Violation:
    """One import that breaks a rule."""

    path: str
    line: int
    statement: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  -- {self.rule}"


def package_dirs() -> dict[str, str]:
    """pyproject's ``package-dir``: installed package name -> repository folder."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        config = tomllib.load(file)
    return config["tool"]["setuptools"]["package-dir"]


def source_files() -> dict[str, Path]:
    """Every .py file that installs, by its module name (packages by their own name)."""
    modules: dict[str, Path] = {}
    for package, folder in package_dirs().items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            # The ivm folder's walk also sees nothing of the others: they live beside it.
            modules.setdefault(name, path)
    return modules


MODULES = source_files()


def rank(module: str) -> tuple[int, ...] | None:
    """The layer rank of an ivm module, or None if no layer claims it."""
    if module == "ivm":
        return TOP
    for prefix, value in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return value
    return None


def layer_name(module: str) -> str:
    """The layer prefix a module belongs to, for messages."""
    if module == "ivm":
        return "ivm (the package itself)"
    for prefix, _ in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return module


def imported_modules(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> list[str]:
    """The modules an import statement loads, relative imports resolved.

    ``from x import y`` loads ``x.y`` when that is a module of the project, else ``x``
    (y is then a name defined in x).
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    targets = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in known else base)
    return list(dict.fromkeys(targets))


def check_source(
    source: str, module: str, path: str, is_package: bool = False, known: set[str] | None = None
) -> list[Violation]:
    """The rule violations of one module's source text."""
    known = set(MODULES) if known is None else known
    own = rank(module)
    violations: list[Violation] = []
    if own is None:
        rule = f"{module} is in no layer: add its prefix to LAYERS in tests/test_layers.py"
        violations.append(Violation(path, 1, "(the module itself)", rule))
        own = TOP  # its imports are then checked as if it were on top
    for node in ast.walk(ast.parse(source, filename=path)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        statement = ast.get_source_segment(source, node) or ast.unparse(node)
        statement = " ".join(statement.split())

        def report(rule: str, node: ast.stmt = node, statement: str = statement) -> None:
            violations.append(Violation(path, node.lineno, statement, rule))

        for target in imported_modules(node, module, is_package, known):
            top = target.partition(".")[0]
            if top in SPARK_ONLY and not module.startswith(
                tuple(p + "." for p in SPARK_PACKAGES) + SPARK_PACKAGES
            ):
                report(
                    f"{module} imports {top}; only {' and '.join(SPARK_PACKAGES)} may "
                    "(pyspark is an optional dependency)"
                )
            elif top in FOLDER_NAMES:
                report(f"{target!r} is a repository folder; import it as 'ivm.{target}'")
            elif top == "ivm":
                target_rank = rank(target)
                if target_rank is None:
                    report(f"{target} is in no layer: add its prefix to LAYERS")
                elif target_rank > own:
                    report(
                        f"{layer_name(module)} may not import {layer_name(target)}, a higher "
                        "layer (dependencies point down only)"
                    )
    return violations


def check_file(module: str) -> list[Violation]:
    """The rule violations of one installed module."""
    path = MODULES[module]
    return check_source(
        path.read_text(encoding="utf-8"),
        module,
        str(path.relative_to(ROOT)),
        is_package=path.name == "__init__.py",
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_respect_the_layers(module: str) -> None:
    """No module imports a higher layer, or pyspark outside the Spark subpackages."""
    violations = check_file(module)
    assert not violations, "\n".join(["layer rules broken:", *map(str, violations)])


def test_every_folder_is_read() -> None:
    """The walk finds the four folders' modules (an empty walk would pass everything)."""
    tops = {name.split(".")[1] if name.count(".") else name for name in MODULES}
    assert {"ivm", "errors", "schema", "storage", "sql_frontend", "views"} <= tops
    assert "ivm.views.batches" in MODULES


# --- the checker can fail -------------------------------------------------------------------


FAKE_KNOWN = {"ivm", "ivm.errors", "ivm.storage", "ivm.storage.traces", "ivm.views"}


def fake(source: str, module: str, is_package: bool = False) -> list[Violation]:
    """Check source as if it were `module`."""
    path = module.replace(".", "/") + ".py"
    return check_source(source, module, path, is_package, FAKE_KNOWN)


def test_checker_reports_an_upward_import() -> None:
    violations = fake("import os\n\nfrom ivm.views.session import Session\n", "ivm.storage.fake")
    assert [(v.line, v.statement) for v in violations] == [
        (3, "from ivm.views.session import Session")
    ]
    assert "ivm.storage may not import ivm.views" in violations[0].rule
    assert str(violations[0]).startswith("ivm/storage/fake.py:3: from ivm.views.session")


def test_checker_reports_upward_imports_inside_the_engine_and_nested() -> None:
    source = "def f():\n    if True:\n        import ivm.execution.embedded\n"
    violations = fake(source, "ivm.operators.fake")
    assert [v.line for v in violations] == [3]
    assert "ivm.operators may not import ivm.execution" in violations[0].rule


def test_checker_reports_pyspark_outside_spark_packages() -> None:
    source = "import pyspark.sql as ps\nfrom py4j.java_gateway import JavaGateway\n"
    assert [v.line for v in fake(source, "ivm.views.session")] == [1, 2]
    assert [v.line for v in fake(source, "ivm.execution.embedded")] == [1, 2]
    assert fake(source, "ivm.views.spark.session") == []
    assert fake(source, "ivm.execution.spark") == []


def test_checker_reports_the_package_itself_and_folder_names() -> None:
    assert [v.line for v in fake("import ivm\n", "ivm.plan.fake")] == [1]
    assert [v.line for v in fake("from ivm import connect\n", "ivm.views.fake")] == [1]
    assert [v.line for v in fake("from storage import traces\n", "ivm.views.fake")] == [1]


def test_checker_allows_own_and_lower_layers() -> None:
    source = (
        "from ivm import errors\n"  # ivm.errors is a module: layer 0, not the package
        "from ivm.errors import SchemaError\n"
        "import ivm.storage.traces\n"
        "from ivm.operators.base import Operator\n"
        "from ivm.schema import Schema\n"
    )
    assert fake(source, "ivm.operators.join") == []
    assert fake("from ivm.views.session import Session\n", "ivm") == []


def test_checker_resolves_relative_imports() -> None:
    assert [v.line for v in fake("from ..views import session\n", "ivm.storage.fake")] == [1]
    assert fake("from . import traces\n", "ivm.storage", is_package=True) == []
    assert fake("from .traces import x\n", "ivm.storage.fake") == []


def test_checker_reports_a_module_in_no_layer() -> None:
    violations = fake("import os\n", "ivm.mystery")
    assert len(violations) == 1
    assert "ivm.mystery is in no layer" in violations[0].rule


def test_checker_reports_a_module_without_imports_in_no_layer() -> None:
    assert [v.statement for v in fake("X = 1\n", "ivm.mystery")] == ["(the module itself)"]
