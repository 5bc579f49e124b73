"""Every code block in the README and ``docs/`` runs (issue #27, item 1).

Per file, in a fresh directory: ``python`` blocks run in order in one namespace (a
page's blocks continue each other); ``sh`` blocks run with bash (``set -e``), with
``ivm`` on the PATH as this checkout's command line; a block of ``make`` lines is
checked against the Makefile's targets, and ``make demo`` runs its script. ``text``
blocks are pictures of layouts and output, or commands too long to run here (the
benchmarks): a ``make`` line there must name a target, and a benchmark's command line
must parse with the script's own arguments. Any other kind of block fails.
``docs/spark.md`` runs with the tests' SparkSession active.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.M | re.S)
KINDS = {"python", "sh", "text"}


def blocks(page: Path) -> list[tuple[str, str]]:
    """(kind, code) of every fenced block of ``page``, in order."""
    return [(m[1], m[2]) for m in FENCE.finditer(page.read_text())]


def test_every_block_is_of_a_known_kind() -> None:
    for page in PAGES:
        for kind, _ in blocks(page):
            assert kind in KINDS, f"{page.name}: a ```{kind} block (use python, sh or text)"


def test_the_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_bytes()) <= 12_500
    assert (ROOT / "README.md").read_text().split("\n")[3:5] == [
        "make demo   # creates .venv, installs ivm, runs examples/quickstart.py (embedded mode)",
        "make test   # creates .venv, installs ivm with its test extras, runs the test suite",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_page_runs(page: Path, tmp_path: Path, request: Any, monkeypatch: Any) -> None:
    found = [(k, c) for k, c in blocks(page) if k in ("python", "sh")]
    if not found:
        pytest.skip("no code on this page")
    if page.name == "spark.md":
        request.getfixturevalue("spark")  # the active SparkSession getOrCreate() returns
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    for number, (kind, code) in enumerate(found):
        where = f"{page.name}, block {number + 1}"
        if kind == "python":
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code
        else:
            run_shell(code, tmp_path, where)


def run_shell(code: str, cwd: Path, where: str) -> None:
    """A ``sh`` block: make lines checked (and ``make demo`` run), else the block in bash."""
    lines = [line.split("#")[0].strip() for line in code.splitlines()]
    lines = [line for line in lines if line]
    if lines and all(line.startswith("make ") for line in lines):
        targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
        for line in lines:
            assert line.split()[1] in targets, f"{where}: no make target {line.split()[1]}"
        if "make demo" in lines:
            demo = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")],
                                  capture_output=True, text=True, timeout=300, check=False)
            assert demo.returncode == 0, f"{where}: make demo failed:\n{demo.stderr[-2000:]}"
        return
    shims = cwd / ".bin"
    shims.mkdir(exist_ok=True)
    (shims / "ivm").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ivm.views.cli "$@"\n')
    (shims / "ivm").chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", "-e", "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


BENCH = re.compile(r"^(?:\.venv/bin/python )?(benchmarks/\w+\.py)(.*)$")
PARSE_ONLY = """
import argparse, json, os, runpy, sys
class Parsed(Exception):
    pass
def parse_only(self, args=None, namespace=None):
    original(self, args, namespace)
    raise Parsed
original = argparse.ArgumentParser.parse_args
argparse.ArgumentParser.parse_args = parse_only
failures = []
for script, args in json.loads(sys.argv[1]):
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as running it does
    try:
        runpy.run_path(script, run_name="__main__")
        failures.append(f"{script} {' '.join(args)}: ran without parsing its arguments")
    except Parsed:
        pass
    except SystemExit as exit:
        if exit.code == 0 and "--help" in args:
            continue
        failures.append(f"{script} {' '.join(args)}: exit {exit.code}")
print(json.dumps(failures))
"""


def test_commands_shown_as_text_are_real() -> None:
    # Benchmark commands are shown, not run (they take minutes to hours): each must be a
    # make target or parse with its script's own arguments (the script stops once parsed).
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    commands: list[tuple[str, list[str]]] = []
    for page in PAGES:
        for kind, code in blocks(page):
            for line in (line.split("#")[0].strip() for line in code.splitlines()):
                if kind != "text" or "<" in line:
                    continue
                if line.startswith("make "):
                    assert line.split()[1] in targets, f"{page.name}: no make target: {line}"
                elif found := BENCH.match(line):
                    commands.append((found[1], found[2].replace("[", "").replace("]", "").split()))
    assert len(commands) >= 10
    done = subprocess.run([sys.executable, "-c", PARSE_ONLY, json.dumps(commands)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
