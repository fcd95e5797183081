"""What ``make dist`` ships, checked without building: the version has one source, the package data the
wheel must carry exists and is declared, MANIFEST.in puts what builds and tests tapegrad into the sdist,
and the wheel's smoke test (``tests/smoke_wheel.py``, which ``make dist`` runs in a fresh environment)
passes here, on the source, so that it does not rot between releases."""
import importlib.metadata
import os
import pathlib
import subprocess
import sys

import tapegrad

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_pyprojects():
    version = PYPROJECT["project"]["version"]
    assert tapegrad.__version__ == importlib.metadata.version("tapegrad") == version
    assert f'"{version}"' not in (ROOT / "src" / "tapegrad" / "__init__.py").read_text()  # no second copy


def test_the_package_data_is_declared_and_present():
    declared = PYPROJECT["tool"]["setuptools"]["package-data"]["tapegrad"]
    assert {"py.typed", "coverage_reference.json"} <= set(declared)
    for name in declared:
        assert (ROOT / "src" / "tapegrad" / name).is_file(), name


def test_the_sdist_carries_what_builds_and_tests_the_package():
    lines = {line.strip() for line in (ROOT / "MANIFEST.in").read_text().splitlines()}
    for folder in ("tests", "docs", "notebooks", "examples", "benchmarks"):
        assert f"graft {folder}" in lines, folder
    included = {name for line in lines if line.startswith("include ") for name in line.split()[1:]}
    assert {"Makefile", "noxfile.py", "CHANGELOG.md", "LICENSE"} <= included


def test_the_wheels_smoke_test_passes_on_the_source(tmp_path):
    # the tapegrad this suite imports (the editable install's, or src/ on PYTHONPATH), from another folder
    path = os.pathsep.join([str(pathlib.Path(tapegrad.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "smoke_wheel.py"), "--from-source"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": path})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "smoke test passed" in run.stdout
