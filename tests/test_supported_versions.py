"""The versions tapegrad claims are the versions ``make test-versions`` tests: noxfile.py's Pythons are
pyproject.toml's, and the lowest session pins every requirement to the floor pyproject.toml declares."""
import importlib.util
import pathlib
import re

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def noxfile():
    pytest.importorskip("nox", reason="nox is in the dev extra")
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sessions_cover_the_pythons_pyproject_admits(noxfile):
    classifiers = [c.rsplit(" ", 1)[1] for c in PYPROJECT["project"]["classifiers"]
                   if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert noxfile.PYTHONS == classifiers
    assert PYPROJECT["project"]["requires-python"] == f">={noxfile.PYTHONS[0]}"
    assert noxfile.tests_lowest.python == noxfile.PYTHONS[0]  # the floors on the oldest Python


def test_every_requirement_is_pinned_at_its_floor(noxfile):
    extras = PYPROJECT["project"]["optional-dependencies"]
    pins = dict(line.split("==") for line in noxfile.lowest_constraints(PYPROJECT).splitlines())
    for req in noxfile.requirements(PYPROJECT):
        name, floor = re.fullmatch(r"([\w.-]+)(?:>=|==)(\S+)", req).groups()  # == pins exactly (mypy)
        assert pins[name.lower().replace("_", "-")] == floor, req
    # every extra but CuPy's (which need a GPU) and the pinned peers (make test-peers) is installed by the
    # lowest session
    assert set(extras) - set(noxfile.TESTED_EXTRAS) == {"cuda12", "cuda13", "cupy", "peers"}


def test_the_cupy_extras():
    """One extra per CUDA major, and ``cupy`` an alias of ``cuda12`` (what it installed before there were
    two): an alias that drifted would install another CuPy than the docs say."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert [req.split(">=")[0] for req in extras["cuda12"] + extras["cuda13"]] == ["cupy-cuda12x", "cupy-cuda13x"]
    assert extras["cupy"] == extras["cuda12"]


@pytest.mark.parametrize("bad, message", [
    (["numpy"], "no floor"), (["numpy<3"], "no floor"), (["numpy>=2.2,<3"], "no floor"),
    (["numpy>=2.2", "numpy>=2.3"], "two floors"),
])
def test_a_requirement_without_one_floor_is_refused(noxfile, bad, message):
    fake = {"project": {"dependencies": bad, "optional-dependencies": {}}}
    with pytest.raises(ValueError, match=message):
        noxfile.lowest_constraints(fake)
