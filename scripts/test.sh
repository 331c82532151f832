#!/usr/bin/env bash
# Runs every test: sets up the Python oracles in .venv (onnx, onnxruntime, LiteRT, the XLA CPU plugin, JAX) and
# TensorFlow's converter in .venv-tf, regenerates the ONNX backend node suite into conformance/cases, then runs
# the Rust tests, the conformance harness and the peer comparisons included.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
if [ ! -x .venv-tf/bin/python ]; then
    python3 -m venv .venv-tf
fi
.venv-tf/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements-tf.txt

if [ ! -f conformance/cases/.complete ]; then
    rm -rf conformance/cases
    .venv/bin/python conformance/generate.py conformance/cases
    touch conformance/cases/.complete
fi

# MediaPipe's published TFLite models (from the mediapipe 0.10.14 wheel, the last one that ships them), for the
# import test against LiteRT.
if [ ! -f .cache/mediapipe/.complete ]; then
    rm -rf .cache/mediapipe
    .venv/bin/pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux2014_x86_64 mediapipe==0.10.14 -d .cache/mediapipe/wheel
    .venv/bin/python - <<'PY'
import glob, zipfile
z = zipfile.ZipFile(glob.glob(".cache/mediapipe/wheel/*.whl")[0])
for n in z.namelist():
    if n.endswith(".tflite"):
        z.extract(n, ".cache/mediapipe")
PY
    rm -rf .cache/mediapipe/wheel
    touch .cache/mediapipe/.complete
fi
export TPU_SDK_MEDIAPIPE_MODELS="$PWD/.cache/mediapipe"

# MediaPipe's own runtime (the mediapipe 0.10.14 wheel in a venv of its own, `.cache/zoo/venv-mp`, made by the
# zoo's `build_wheels.mediapipe_runtime_venv` with its pinned versions: 45 s, 1 GB): the peer of the attention face
# mesh, whose custom ops LiteRT cannot run (cli/tests/mediapipe_attention.rs, zoo/mediapipe_graph_peer.py).
# Its wheels stop at CPython 3.12: elsewhere the install fails, a warning says so, and that test notes the skip.
mp_venv=.cache/zoo/venv-mp
if ! "$mp_venv/bin/python" -c 'import mediapipe' 2>/dev/null; then
    rm -rf "$mp_venv"
    if ! { .venv/bin/python -c 'import sys; sys.path.insert(0, "zoo"); import build_wheels; build_wheels.mediapipe_runtime_venv()' \
            && "$mp_venv/bin/python" -c 'import mediapipe'; }; then
        echo "=== WARNING: MediaPipe's runtime could not be installed; the attention face mesh is not compared with it ==="
        rm -rf "$mp_venv"
    fi
fi
if [ -x "$mp_venv/bin/python" ]; then export TPU_SDK_REQUIRE_MEDIAPIPE=1; fi

export TPU_SDK_PYTHON="$PWD/.venv/bin/python"
export TPU_SDK_TF_PYTHON="$PWD/.venv-tf/bin/python"
export TPU_SDK_REQUIRE_TF=1
TPU_SDK_LIBTPU="$(.venv/bin/python -c 'import os, libtpu; print(os.path.join(os.path.dirname(libtpu.__file__), "libtpu.so"))')"
export TPU_SDK_LIBTPU
export TPU_SDK_REQUIRE_CONFORMANCE=1
export TPU_SDK_REQUIRE_ORACLES=1
export TPU_SDK_REQUIRE_SSHD=1
export TPU_SDK_REQUIRE_VALGRIND=1
bash zoo/run.sh --fast  # the model zoo's CI subset: 7 real models on every target, zoo/expected_fast.txt must pass
# each test binary's start time, so that a slow one shows in the log
stamp() { while IFS= read -r line; do case $line in *Running*) echo "[$(date -u +%H:%M:%S)] $line" ;; *) echo "$line" ;; esac; done; }
echo "[$(date -u +%H:%M:%S)] cargo test --workspace"
cargo test --workspace -- --nocapture 2>&1 | grep --line-buffered -v '^$' | grep --line-buffered -vE '^test .* \.\.\. ok$' | stamp
rc=${PIPESTATUS[0]}
echo "[$(date -u +%H:%M:%S)] cargo test --workspace finished (exit $rc)"
[ "$rc" -eq 0 ] || exit "$rc"
# The short fuzz pass: every cargo-fuzz target for 10 s, built without optimisation (minutes sooner than the long
# runs' optimised build; fuzz/README.md, `bash scripts/fuzz.sh 600` for a long run). TPU_SDK_FUZZ_SECONDS sets it.
FUZZ_BUILD=dev bash scripts/fuzz.sh "${TPU_SDK_FUZZ_SECONDS:-10}"
