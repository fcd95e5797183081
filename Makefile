# Each target creates .venv when it is missing and installs what it needs, so `make demo` and
# `make test` work as the first command on a fresh machine (Python >= 3.10 and a package registry).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-peers docs test-versions lint test-matrix test-device test-native test-gpu fuzz bench bench-publish \
	bench-gpu bench-gpu-publish dist clean mutate

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[$*]'
	touch $@

demo: $(VENV)/.installed-examples
	$(PY) examples/train_digits.py

# ruff (pyproject.toml [tool.ruff]), the layer contract (pyproject.toml [tool.importlinter],
# docs/architecture.md) and mypy (`lint`), then the suite with one BLAS thread (the tests use small matrices, where
# OpenBLAS's threads only contend for the cores) in one pytest-xdist worker per core, in random order; then the
# site (`docs`, below: its build takes minutes, so it is a step of its own, not a test with a time limit)
test: lint
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto -m "not peer"
	$(SITE)

# the site (docs/conf.py): Sphinx with MyST-NB and Furo, every tutorial (notebooks/) and executable page
# (docs/) run anew, every warning an error; the source is the repository root, of which it reads docs/ and
# notebooks/ (docs/site.md); open docs/_build/html/index.html. -E reads every page anew (an incremental build
# would neither run an unchanged page's cells nor repeat its warnings); then tests/test_docs.py checks the built
# site for what Sphinx does not fail on (a public name autodoc left out, a tutorial with no executed output)
SITE = OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(VENV)/bin/sphinx-build -W --keep-going -E -b html -c docs . \
	docs/_build/html && $(PY) tests/test_docs.py docs/_build/html
docs: $(VENV)/.installed-docs
	$(SITE)

# the suite on Python 3.10-3.13 and with every dependency at the floor pyproject.toml gives (noxfile.py); each
# session makes its own virtual environment. Under pyenv, every installed 3.10+ interpreter is put on the path
# (its shims find only the selected version otherwise); a Python that is missing is skipped with a message
test-versions: $(VENV)/.installed-dev
	PYENV_VERSION="$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[0-9]+\.' | tr '\n' ':')$${PYENV_VERSION:-}" \
		$(VENV)/bin/nox $(NOX_FLAGS)

# ...then mypy (pyproject.toml [tool.mypy]) on the package and a typed user program, the same under --strict
# for a strictly typed user program (tapegrad's own modules are read for their types, their errors not
# reported: --strict is the user's setting, not the package's; its own cache, so that the two runs do not
# invalidate each other's), and a check that it rejects tests/typing/bad_usage.py with exactly the errors
# that file names (docs/decisions.md, "Types")
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check src tests benchmarks examples docs/conf.py docs/coverage_page.py docs/coverage_sparse.py noxfile.py
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy src/tapegrad tests/typing/good_usage.py
	$(VENV)/bin/mypy --strict --follow-imports=silent --cache-dir .mypy_cache/strict tests/typing/strict_usage.py \
		tests/typing/transforms_strict.py tests/typing/jit_methods_strict.py
	$(PY) tests/typing/check_rejected.py

# the suite under other OpenBLAS kernels (Prescott, Nehalem, Sandybridge, Haswell) x 1 and 2 threads,
# each combination in its own random order: tolerances must hold whatever order BLAS sums in
test-matrix: $(VENV)/.installed-dev
	$(PY) tests/matrix.py

# the whole suite with jit's compiled executor on (numba; `make test` runs it on the Python executor, save
# tests/test_jit_native.py): every program that lowers compiles, and numba refusing a lowering's source fails
# the test (TAPEGRAD_NATIVE_STRICT) instead of falling back; the tests that check the Python executor's own
# machinery (numexpr fusion, the Python-float loop) are marked `python_executor` and keep it (docs/jit.md)
test-native: $(VENV)/.installed-dev
	TAPEGRAD_COMPILED_EXECUTOR=1 TAPEGRAD_NATIVE_STRICT=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
		$(PY) -m pytest -q -n auto

# every case of the device tests through every route, on the strict device double (docs/devices.md);
# `make test` runs a sample of them
test-device: $(VENV)/.installed-dev
	TAPEGRAD_DEVICE_TESTS=all OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q tests/test_device_*.py

# on a machine with CuPy and a GPU: the `gpu` tests, then every device case through every route with real
# CuPy in place of the double (TAPEGRAD_DEVICE=cupy), ending with both counts (tests/gpu_suite.py,
# docs/testing.md); elsewhere one line says why there is nothing to run, and it exits 0. CuPy is not in
# the dev extra (it needs a CUDA driver): .venv/bin/pip install -e '.[dev,cuda13]' (or cuda12) first
test-gpu: $(VENV)/.installed-dev
	$(PY) tests/gpu_suite.py $(PYTEST_ARGS)

# the property tests with Hypothesis's long profile (tests/conftest.py): many random examples per test,
# failures kept in .hypothesis/ and replayed first on the next run
fuzz: $(VENV)/.installed-dev
	HYPOTHESIS_PROFILE=fuzz OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q \
		--hypothesis-show-statistics tests/test_properties*.py

# every benchmark, its table printed, its rows in benchmarks/out/results.json and the picture
# benchmarks/out/results.png (each tapegrad row's time over the best peer's, benchmarks/plot.py); the folder
# is ignored by git. BENCH_FLAGS=--quick for a smoke run, BENCH_FLAGS=chain for one benchmark
BENCH_OUT := benchmarks/out
bench: $(VENV)/.installed-bench
	mkdir -p $(BENCH_OUT)
	$(PY) benchmarks/run.py $(BENCH_FLAGS) --json $(BENCH_OUT)/results.json
	$(PY) benchmarks/plot.py $(BENCH_OUT)/results.json $(BENCH_OUT)/results.png

# the published figures: every benchmark, in full, into the committed benchmarks/results.json and
# results.png that docs/benchmarks.md shows; run.py refuses --quick or a subset here
bench-publish: $(VENV)/.installed-bench
	$(PY) benchmarks/run.py $(BENCH_FLAGS) --json benchmarks/results.json
	$(PY) benchmarks/plot.py benchmarks/results.json benchmarks/results.png

# on a machine with CuPy and a GPU: benchmarks/bench_gpu.py, five float32 workloads, tapegrad eager and jit on
# CuPy against PyTorch CUDA and JAX GPU where installed (each one's gradients checked first), medians of
# interleaved, device-synchronised calls, each target MET or MISSED; its rows in
# benchmarks/out/results-gpu.json and the picture results-gpu.png (ignored by git). Elsewhere one line says
# why there is nothing to run, and it exits 0. BENCH_FLAGS=--quick for a smoke run, BENCH_FLAGS=gp for one
# workload; benchmarks/gpu_session.sh runs this and test-gpu on a GPU machine that has no package registry
bench-gpu: $(VENV)/.installed-bench
	mkdir -p $(BENCH_OUT)
	$(PY) benchmarks/bench_gpu.py $(BENCH_FLAGS) --json $(BENCH_OUT)/results-gpu.json --png $(BENCH_OUT)/results-gpu.png

# the published GPU figures: a full run into the committed benchmarks/results-gpu.json and results-gpu.png
# that docs/benchmarks.md's GPU section shows; bench_gpu.py refuses --quick, a subset or the double here
bench-gpu-publish: $(VENV)/.installed-bench
	$(PY) benchmarks/bench_gpu.py $(BENCH_FLAGS) --json benchmarks/results-gpu.json --png benchmarks/results-gpu.png

# the release files: the sdist and the wheel in dist/ (python -m build; MANIFEST.in says what the sdist
# adds), checked by twine and by tests/check_dist.py (the wheel's package data, the sdist's folders); then
# the wheel, with its checkpoint extra, goes into a fresh virtual environment and tests/smoke_wheel.py runs
# there with `python -I` from an empty folder, so that nothing comes from src/ (docs/testing.md)
dist: $(VENV)/.installed-dist
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	$(PY) tests/check_dist.py dist
	@tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && set -e && \
		echo "a fresh virtual environment in $$tmp/venv: $$(ls dist/*.whl)[checkpoint]" && \
		$(PYTHON) -m venv "$$tmp/venv" && \
		"$$tmp/venv/bin/python" -m pip install --quiet --upgrade pip && \
		"$$tmp/venv/bin/python" -m pip install --quiet "$$(ls dist/*.whl)[checkpoint]" && \
		mkdir "$$tmp/cwd" && cd "$$tmp/cwd" && "$$tmp/venv/bin/python" -I $(CURDIR)/tests/smoke_wheel.py

clean:
	rm -rf $(VENV) docs/_build demo_output .pytest_cache .hypothesis build dist

# the comparison tests against PyTorch (CPU build) and JAX, the `peer`-marked tests that `make test` leaves out:
# the peers extra installed, then those tests alone, with their own count; CI runs this after `make test`, and
# under CI=true a missing peer is an error, not a skip (tests/conftest.py)
test-peers: $(VENV)/.installed-dev $(VENV)/.installed-peers
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto -m peer

# the mutation check: a fixed list of realistic bugs (a sign in a rule, a reverse loop off by one, a wrong
# unbroadcast axis, a dropped transpose, a lowering of one op as another...; tests/mutate.py) planted one at a
# time in a temporary copy of the working tree, each followed by the tests that should catch it; fails if one
# is not caught or no longer applies (docs/testing.md, "Mutation check"). A few minutes
mutate: $(VENV)/.installed-dev
	$(PY) tests/mutate.py
