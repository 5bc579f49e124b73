"""The repository's layout matches what installs: packages listed in pyproject, modules short.

pyproject's ``[tool.setuptools]`` names every package explicitly (``packages``) and maps
the repository folders ``sql_frontend/``, ``storage/`` and ``views/`` under ``ivm``
(``package-dir``). A package folder missing from the list installs nothing in a
regular (non-editable) install, though an editable one may still find it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAX_LINES = 400
"""The longest a module may be (STYLE: short modules, one job each)."""

LONG_MODULES: dict[str, str] = {
    # "path/from/repo/root.py": "why it may be longer, and until when",
}
"""Modules allowed over MAX_LINES, each with its reason. Keep it empty: split instead."""


def setuptools_config() -> dict:
    """pyproject's ``[tool.setuptools]`` table."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["setuptools"]


def package_dirs() -> dict[str, Path]:
    """Installed package name -> repository folder, from ``package-dir``."""
    return {name: ROOT / folder for name, folder in setuptools_config()["package-dir"].items()}


def installed_name(folder: Path) -> str | None:
    """The name a repository folder installs as, or None if it installs nowhere."""
    for package, base in package_dirs().items():
        if folder == base or base in folder.parents:
            parts = folder.relative_to(base).parts
            return ".".join((package, *parts))
    return None


def source_folders() -> list[Path]:
    """Every folder under the installed roots that holds a .py file."""
    folders = {path.parent for base in package_dirs().values() for path in base.rglob("*.py")}
    return sorted(folders)


def package_folders() -> dict[str, Path]:
    """Every folder with an ``__init__.py`` under the installed roots, by installed name."""
    found = {}
    for base in package_dirs().values():
        for init in base.rglob("__init__.py"):
            name = installed_name(init.parent)
            assert name is not None
            found[name] = init.parent
    return found


def test_package_dir_folders_exist() -> None:
    for package, folder in package_dirs().items():
        assert (folder / "__init__.py").is_file(), f"package-dir maps {package} to {folder}"


def test_every_package_folder_is_listed() -> None:
    listed = set(setuptools_config()["packages"])
    missing = {name: path for name, path in package_folders().items() if name not in listed}
    assert not missing, (
        "add these packages to [tool.setuptools] packages in pyproject.toml: "
        + ", ".join(f"{name} ({path.relative_to(ROOT)})" for name, path in sorted(missing.items()))
    )


def test_every_listed_package_exists() -> None:
    found = package_folders()
    stale = sorted(set(setuptools_config()["packages"]) - set(found))
    assert not stale, f"pyproject.toml lists packages with no folder and __init__.py: {stale}"


def test_every_folder_with_modules_is_a_package() -> None:
    """A folder of modules without ``__init__.py`` is a namespace package: it is in no
    ``packages`` list, so a regular install leaves its modules out."""
    loose = [
        str(folder.relative_to(ROOT))
        for folder in source_folders()
        if not (folder / "__init__.py").is_file()
    ]
    assert not loose, f"folders holding modules but no __init__.py: {loose}"


def test_modules_are_short() -> None:
    long = {}
    for base in package_dirs().values():
        for path in base.rglob("*.py"):
            name = str(path.relative_to(ROOT))
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES and name not in LONG_MODULES:
                long[name] = lines
    assert not long, f"modules over {MAX_LINES} lines (split them): " + ", ".join(
        f"{name} ({lines})" for name, lines in sorted(long.items())
    )


def test_allow_list_is_current() -> None:
    """Every allowed long module still exists and is still long."""
    for name in LONG_MODULES:
        path = ROOT / name
        assert path.is_file(), f"LONG_MODULES names {name}, which is gone"
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines > MAX_LINES, f"{name} is {lines} lines now: drop it from LONG_MODULES"
