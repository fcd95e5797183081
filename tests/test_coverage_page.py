"""docs/coverage.md is current (regenerated in memory, compared with the file), its reference lists
are the issue's counts, and its probes can fail: a wrong derivative rule, Python control flow on a
traced value and an integer-valued function are each marked as they should be."""
from __future__ import annotations

import importlib.resources
import importlib.util
import json
import pathlib

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location("coverage_page", DOCS / "coverage_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_current(coverage):
    assert coverage.PAGE.read_text() == coverage.render(), (
        "docs/coverage.md is stale: run python docs/coverage_page.py and commit the page")


def test_the_reference_lists_have_jax_counts():
    # package data: the page's script and an installed wheel read it through importlib.resources
    reference = json.loads((importlib.resources.files("tapegrad") / "coverage_reference.json").read_text())
    counts = {name: len(names) for name, names in reference["names"].items()}
    assert counts == {"tapegrad.numpy": 343, "tapegrad.numpy.linalg": 31, "tapegrad.numpy.fft": 18,
                      "tapegrad.scipy.special": 53, "tapegrad.scipy.stats": 30, "tapegrad.scipy.linalg": 40,
                      "tapegrad.scipy.signal": 10, "tapegrad.scipy.integrate": 2}
    assert len([n for n in reference["names"]["tapegrad.numpy"] if n not in reference["excluded"]]) == 329
    assert set(reference["generated_with"]) == {"jax", "numpy", "scipy"}


@tg.custom_vjp
def _wrong_vjp(x):
    return tnp.sin(x)


_wrong_vjp.defvjp(lambda x: (tnp.sin(x), x), lambda x, ct: (ct * 2.0,))


def _python_branch(x):
    return x * 2.0 if float(tnp.sum(x)) > 0 else x  # Python control flow on a traced value


def test_probes_report_failures_and_what_does_not_apply(coverage):
    wrong = coverage.probe("wrong_vjp", _wrong_vjp)
    assert wrong["value"][0] == "✓" and wrong["vjp"] == ("✗", "AssertionError") and wrong["vmap"][0] == "✓"
    branch = coverage.probe("python_branch", _python_branch)
    assert branch["jit"] == ("✗", "ConcretizationError") and branch["vmap"][0] == "✗"
    assert branch["vjp"] == ("✗", "ConcretizationError")  # float() of a value that carries a derivative
    rank = coverage.probe("matrix_rank", tnp.linalg.matrix_rank)
    assert rank["value"][0] == "✓" and rank["vjp"][0] == rank["jvp"][0] == "–" and rank["jit"][0] == "✓"
    assert coverage.probe("dtype_of", lambda x: np.result_type(x))["value"] == ("–", "not an array function")


def test_every_public_function_is_on_the_page(coverage):
    page = coverage.PAGE.read_text()
    for module, _, _ in coverage.NAMESPACES:
        if coverage._import(module) is None:
            continue
        for name, _ in coverage.public_functions(module):
            assert f"| `{name}` |" in page, f"{module}.{name}"
