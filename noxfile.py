"""The supported versions, tested: ``make test-versions`` (``nox``) runs the suite in fresh virtual
environments on every Python that ``pyproject.toml`` admits, and once with every dependency at its floor.

Sessions:
    tests-3.10 … tests-3.13: ``pip install -e '.[dev]'`` (the newest releases the index offers), then the
        suite. An interpreter that is not on the machine is skipped with a message, not a failure.
    tests-lowest: Python 3.10, every runtime dependency and every extra but CuPy's (``cuda12``, ``cuda13``
        and their alias ``cupy``) pinned to the lowest version ``pyproject.toml`` admits, through a
        constraints file written from ``pyproject.toml`` at the start of the session
        (:func:`lowest_constraints`), so that the floors tested are the floors declared. CuPy needs a GPU;
        the strict device double stands in for it (docs/devices.md).

``nox -s tests-lowest`` runs one session, ``nox -l`` lists them. docs/decisions.md says why each floor is
where it is.
"""
from __future__ import annotations

import pathlib
import re

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

ROOT = pathlib.Path(__file__).parent
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
# every extra the suite can use; CuPy's (cuda12, cuda13, cupy) need a GPU and CUDA, which the test machines
# do not have, and the peers (PyTorch, JAX: `make test-peers`, which CI runs on the main Python) are pinned to
# one release each, whose CPU build the index may offer for one Python only. Their floors are still checked by
# lowest_constraints (one floor per package)
TESTED_EXTRAS = ["dev", "docs", "examples", "bench", "checkpoint", "distributed", "jit", "numba", "dist", "threads"]
# one BLAS thread: the suite's matrices are small, and xdist runs one worker per core (as `make test`)
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

nox.options.error_on_missing_interpreters = False
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "tests-lowest"]

# a floor, name>=version; or an exact pin, name==version, which is its own floor (mypy: a checker's new
# release adds checks, so `make lint` runs the one release it was made clean with)
_FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:>=|==)\s*([^,;\s]+)\s*$")


def requirements(pyproject: dict, extras=None) -> list:
    """The runtime dependencies and the requirements of ``extras`` (all when None), in file order."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    names = optional if extras is None else extras
    return list(project["dependencies"]) + [req for extra in names for req in optional[extra]]


def lowest_constraints(pyproject: dict, extras=None) -> str:
    """A pip constraints file pinning each requirement to its floor: ``numpy>=2.0`` gives ``numpy==2.0``.

    Raises:
        ValueError: a requirement without a single ``>=`` floor (it could not be tested at its lowest),
            or one package given two different floors.
    """
    pins = {}
    for req in requirements(pyproject, extras):
        match = _FLOOR.match(req)
        if match is None:
            raise ValueError(f"pyproject.toml: {req!r} has no floor of the form 'name>=version'; give it one, "
                             "so that tests-lowest can pin it")
        name, floor = match.group(1).lower().replace("_", "-"), match.group(2)
        if pins.setdefault(name, floor) != floor:
            raise ValueError(f"pyproject.toml gives {name} two floors, {pins[name]} and {floor}; keep one")
    return "".join(f"{name}=={floor}\n" for name, floor in sorted(pins.items()))


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _run_suite(session: nox.Session) -> None:
    """Print the interpreter and the versions the suite runs against, then run it (`make test`'s way: the
    peer comparisons are `make test-peers`')."""
    session.run("python", "-c", "import sys, numpy, optree, scipy; print('python', sys.version.split()[0], "
                "'numpy', numpy.__version__, 'optree', optree.__version__, 'scipy', scipy.__version__)")
    session.run("python", "-m", "pytest", "-q", "-n", "auto", "-m", "not peer", *session.posargs, env=ENV)


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The suite on the newest releases of the dependencies."""
    session.install("-e", ".[dev]")
    _run_suite(session)


@nox.session(name="tests-lowest", python=PYTHONS[0])
def tests_lowest(session: nox.Session) -> None:
    """The suite with every dependency and tested extra at the lowest version pyproject.toml admits."""
    constraints = pathlib.Path(session.create_tmp()) / "lowest-constraints.txt"
    constraints.write_text(lowest_constraints(_pyproject(), TESTED_EXTRAS))
    session.log(f"pinned to the floors of pyproject.toml:\n{constraints.read_text()}")
    session.install("-c", str(constraints), "-e", f".[{','.join(TESTED_EXTRAS)}]")
    _run_suite(session)
