#!/usr/bin/env bash
# One session on a GPU machine that reaches no package registry: `make test-gpu`, then the GPU benchmark,
# every log under $OUT, in 4 to 9 minutes (the two steps time out after 4 and 5). From the repository root:
#
#   OUT=/some/folder bash benchmarks/gpu_session.sh WHEELS [--publish] [--bench-only]
#
# WHEELS: a folder of wheels for what the machine's Python lacks (made beforehand on a machine with a
# registry, docs/benchmarks.md "GPU" gives the command): the image has Python 3.12 with CuPy, PyTorch,
# JAX and pytest, but not optree (tapegrad's dependency) or numexpr. They are installed with --no-index
# into the environment whose Python imports CuPy; tapegrad itself is used from src/ (PYTHONPATH), not
# installed, and the Makefile's install markers are set so that make fetches nothing.
# --publish: `make bench-gpu-publish` (the committed benchmarks/results-gpu.json and .png, a full run)
# instead of `make bench-gpu` (benchmarks/out/); either way the results are copied into $OUT.
# --bench-only: skip `make test-gpu`.
set -u
WHEELS="${1:?usage: OUT=folder bash benchmarks/gpu_session.sh WHEELS [--publish] [--bench-only]}"
shift
PUBLISH=0 TESTS=1
for arg in "$@"; do
    case "$arg" in
        --publish) PUBLISH=1 ;;
        --bench-only) TESTS=0 ;;
        *) echo "gpu_session.sh: unknown option $arg" >&2; exit 2 ;;
    esac
done
WHEELS="$(cd "$WHEELS" && pwd)" || exit 2
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/out/gpu-session}"
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
started=$SECONDS
step() { echo "== $* (at $((SECONDS - started)) s)"; }

step "the Python that imports CuPy"
PYTHON=""
for candidate in "${PYTHON_WITH_CUPY:-}" python3 python /opt/torch/.venv/bin/python; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null && "$candidate" -c "import cupy" 2>/dev/null; then
        PYTHON="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$PYTHON" ]; then
    echo "no Python here imports CuPy (set PYTHON_WITH_CUPY=/path/to/python)"; exit 1
fi
PREFIX="$("$PYTHON" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')"
if [ -n "$PREFIX" ]; then
    VENV="$PREFIX"  # a virtual environment already: make uses it as its own
else
    VENV="$PWD/.venv"  # a system Python: a venv that sees its packages (CuPy, PyTorch, JAX)
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
echo "python $PY ($("$PY" --version 2>&1)); make VENV=$VENV"

step "wheels from $WHEELS"
names=$(ls "$WHEELS"/*.whl 2>/dev/null | xargs -r -n1 basename | sed 's/-.*//' | sort -u | tr '\n' ' ')
if [ -n "$names" ]; then
    # shellcheck disable=SC2086 - one name per word
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" $names || echo "pip install failed (rc $?)"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
touch "$VENV/.installed-dev" "$VENV/.installed-bench"  # the Makefile's markers: installed already, fetch nothing
"$PY" - <<'EOF'
import importlib
missing = []
for name in ("numpy", "optree", "numexpr", "scipy", "cupy", "pytest", "xdist", "hypothesis", "torch", "jax",
             "matplotlib"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '')}")
    except ImportError as error:
        missing.append(name)
        print(f"{name}: MISSING ({error})")
import tapegrad
print("tapegrad from", tapegrad.__file__)
if missing:
    print("missing:", " ".join(missing), "(optree is required; the others lose tests, peers or the picture)")
EOF
{ nvidia-smi || true; git log -1 --format='commit %H %s' 2>/dev/null || true; "$PY" -m pip list 2>/dev/null; } \
    > "$OUT/machine.txt" 2>&1

if [ "$TESTS" = 1 ]; then
    step "make test-gpu (log: $OUT/test-gpu.log)"
    timeout 240 make test-gpu VENV="$VENV" > "$OUT/test-gpu.log" 2>&1
    echo "test-gpu rc=$?"
    tail -n 4 "$OUT/test-gpu.log"
fi

target=bench-gpu
[ "$PUBLISH" = 1 ] && target=bench-gpu-publish
step "make $target (log: $OUT/bench-gpu.log)"
rm -f benchmarks/out/results-gpu.json benchmarks/out/results-gpu.png  # nothing stale goes into $OUT
timeout 300 make "$target" VENV="$VENV" > "$OUT/bench-gpu.log" 2>&1
echo "$target rc=$?"
cat "$OUT/bench-gpu.log"
for f in benchmarks/out/results-gpu.json benchmarks/out/results-gpu.png; do
    [ "$PUBLISH" = 1 ] && f="benchmarks/${f#benchmarks/out/}"
    [ -f "$f" ] && cp "$f" "$OUT/"
done
step "done"
