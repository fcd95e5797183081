"""The comparison tests against PyTorch and JAX (marked ``peer``) never pass unseen: where the peer is
missing they are skipped with the reason, except under ``CI=true``, where the run stops before any test
(tests/conftest.py). Checked in a child pytest on a test file of its own, marked with a peer that no
machine has."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

TESTS = pathlib.Path(__file__).parent
MARKED = '''
import pytest

@pytest.mark.peer("no_such_peer_library")
def test_compares_with_a_missing_peer():
    pass

def test_plain():
    pass
'''


def _run(tmp_path, ci: bool, *options):
    (tmp_path / "test_marked.py").write_text(MARKED)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(TESTS)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "-W", "ignore::pytest.PytestUnknownMarkWarning",
                           *options, "test_marked.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_peer_is_skipped_with_the_reason(tmp_path):
    proc = _run(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "no_such_peer_library is not installed: make test-peers" in proc.stdout


def test_a_missing_peer_stops_a_ci_run(tmp_path):
    proc = _run(tmp_path, ci=True)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "CI=true and a peer library is missing (1 tests need no_such_peer_library)" in output
    assert "passed" not in output  # stopped before any test ran


def test_a_ci_run_that_deselects_the_peer_tests_needs_no_peer(tmp_path):
    """`make test` (-m "not peer") runs in CI before `make test-peers` installs the peers."""
    proc = _run(tmp_path, True, "-m", "not peer")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 deselected" in proc.stdout
