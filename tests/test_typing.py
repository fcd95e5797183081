"""The typing gate (`make lint` runs the same checks): mypy accepts src/tapegrad and a typed user program
(tests/typing/good_usage.py), and rejects one with known mistakes (tests/typing/bad_usage.py) with exactly
the errors its ``# expect: [code]`` comments name, so a configuration that fails for another reason fails.
"""
import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
TYPING = ROOT / "tests" / "typing"
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def run_mypy(tmp_path_factory, *targets):
    cache = tmp_path_factory.getbasetemp() / "mypy_cache"  # shared by the tests of one session
    stdout, stderr, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
                                           "--no-error-summary", "--show-error-codes", *map(str, targets)])
    errors = [m.groupdict() for m in map(ERROR.match, stdout.splitlines()) if m]
    return stdout + stderr, status, errors


def test_the_package_and_the_good_program_check_clean(tmp_path_factory):
    out, status, _ = run_mypy(tmp_path_factory, ROOT / "src" / "tapegrad", TYPING / "good_usage.py")
    assert status == 0, out


def test_the_bad_program_gets_exactly_the_errors_it_expects(tmp_path_factory):
    bad = TYPING / "bad_usage.py"
    expected = {(i, m.group(1)) for i, line in enumerate(bad.read_text().splitlines(), 1)
                if (m := re.search(r"# expect: \[([a-z-]+)\]$", line))}
    assert len(expected) >= 3, "bad_usage.py must name the errors it expects"
    out, status, errors = run_mypy(tmp_path_factory, bad)
    assert status == 1, out
    got = {(int(e["line"]), e["code"]) for e in errors}
    assert got == expected, out
