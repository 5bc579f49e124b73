"""ivm works as installed, from any directory: one top-level name, nothing for a user to shadow.

Each test runs this interpreter in a fresh directory outside the repository, with no
``PYTHONPATH``, as a user would. ``python -c`` puts that directory first on
``sys.path``, so a user's ``views.py`` there is found before any installed top-level
``views``: ivm's folders must install under ``ivm`` (``ivm.views``…), never as
top-level packages of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FOLDER_NAMES = ("views", "storage", "sql_frontend")
"""The repository folders that install under ``ivm``."""

SESSION_CODE = """
import ivm
db = ivm.connect()
db.execute('CREATE TABLE t (a INTEGER)')
db.ingest('t', [{'a': 1}])
print(db.read('t').num_rows)
"""


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run code with this interpreter in cwd, with the environment a user would have."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONSTARTUP"}
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    """The process's stdout, after asserting it succeeded (stderr in the message)."""
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr}"
    return result.stdout.strip()


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """An empty directory outside the repository."""
    assert ROOT not in tmp_path.parents
    return tmp_path


@pytest.fixture
def shadowed(elsewhere: Path) -> Path:
    """A directory holding a user's views.py, storage.py and sql_frontend.py, each of
    which fails loudly if imported."""
    for name in FOLDER_NAMES:
        (elsewhere / f"{name}.py").write_text(
            f"raise RuntimeError('the user\\'s {name}.py was imported instead of ivm\\'s')\n"
        )
    return elsewhere


def test_ivm_is_the_installed_one(elsewhere: Path) -> None:
    """The subprocesses below test this repository's ivm, not some other copy."""
    path = output(run("import ivm; print(ivm.__file__)", elsewhere))
    assert Path(path).resolve() == ROOT / "ivm" / "__init__.py"


def test_session_works_beside_files_named_like_ivm_folders(shadowed: Path) -> None:
    assert output(run(SESSION_CODE, shadowed)) == "1"


def test_package_imports_beside_files_named_like_ivm_folders(shadowed: Path) -> None:
    """Loading every layer's package works beside the user's files (no session needed)."""
    code = "import ivm.views, ivm.storage, ivm.sql_frontend, ivm.views.batches; print('ok')"
    assert output(run(code, shadowed)) == "ok"


def test_star_import(elsewhere: Path) -> None:
    code = """
import inspect, json
from ivm import *
import ivm.errors
errors = sorted(
    name for name, value in vars(ivm.errors).items()
    if inspect.isclass(value) and issubclass(value, ivm.errors.IvmError)
)
wanted = ['connect', 'Session', *errors]
print(json.dumps({
    'errors': errors,
    'missing': [name for name in wanted if name not in globals()],
    'connect': callable(globals().get('connect')),
    'session': inspect.isclass(globals().get('Session')),
}))
"""
    found = json.loads(output(run(code, elsewhere)))
    assert {"IvmError", "SchemaError", "ConstraintError"} <= set(found["errors"])
    assert found["missing"] == []
    assert found["connect"] and found["session"]


@pytest.mark.parametrize("name", FOLDER_NAMES)
def test_no_top_level_folder_packages(elsewhere: Path, name: str) -> None:
    """ivm installs no top-level ``views``, ``storage`` or ``sql_frontend``."""
    code = f"""
try:
    import {name}
except ModuleNotFoundError as exc:
    print('missing', exc.name)
else:
    print('found', {name}.__file__)
"""
    assert output(run(code, elsewhere)) == f"missing {name}"


def test_session_class_resolves(elsewhere: Path) -> None:
    code = """
import inspect, ivm
from ivm import Session
print(inspect.isclass(ivm.Session), ivm.Session is Session, Session.__name__)
"""
    assert output(run(code, elsewhere)) == "True True Session"
