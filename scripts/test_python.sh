#!/usr/bin/env bash
# The Python package (python/, issue 18): builds the wheel with maturin, installs it into a fresh venv with only
# numpy (its one dependency) and then the test needs (python/tests/requirements.txt: pytest, onnxruntime,
# ai-edge-litert, pillow), and runs python/tests there, so the package under test is the wheel's.
#
# The wheel is built in release, after CI's `cargo build --workspace --release`: the python crate is a workspace
# member, and .ci/run exports the PYO3_PYTHON / PYO3_ENVIRONMENT_SIGNATURE maturin sets, so maturin finds the
# extension built and only packs it (`PROFILE=dev` builds a debug wheel instead). maturin lives in its own venv
# (.venv-maturin). Env: PYTHON (default: PYO3_PYTHON, else python3: the machine's Python), TPU_SDK_REQUIRE_ZOO=1
# (the zoo models of `zoo/run.sh --fast` must be present), WHEEL_DIR (keep the wheel there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-${PYO3_PYTHON:-python3}}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

t0=$(date +%s)
if [ ! -x .venv-maturin/bin/maturin ]; then
    "$PY" -m venv .venv-maturin
    .venv-maturin/bin/pip install --quiet --disable-pip-version-check "maturin>=1.7,<2"
fi
profile=(--release)
if [ "${PROFILE:-release}" = dev ]; then profile=(); fi
wheels="${WHEEL_DIR:-$work/wheels}"
if ! .venv-maturin/bin/maturin build "${profile[@]}" -m python/Cargo.toml -i "$PY" -o "$wheels" > "$work/maturin.log" 2>&1; then
    tail -50 "$work/maturin.log"
    echo "test_python.sh: maturin failed"
    exit 1
fi
grep -vE '^\s+(Compiling|Fresh|Downloaded|Downloading)' "$work/maturin.log" || true
wheel=$(ls -t "$wheels"/tpu_sdk-*.whl 2>/dev/null | head -1 || true)
[ -n "$wheel" ] && [ -f "$wheel" ] || { echo "test_python.sh: no wheel was built"; exit 1; }
t1=$(date +%s)

"$PY" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"
"$work/venv/bin/python" -c 'import numpy, tpu_sdk; print("tpu_sdk", tpu_sdk.__version__, "from", tpu_sdk.__file__)'
"$work/venv/bin/pip" install --quiet --disable-pip-version-check -r python/tests/requirements.txt
t2=$(date +%s)

(cd python/tests && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider)
t3=$(date +%s)
echo "=== python package: wheel $((t1 - t0)) s, venv + installs $((t2 - t1)) s, pytest $((t3 - t2)) s ($(basename "$wheel")) ==="
