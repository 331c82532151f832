#!/usr/bin/env bash
# The Python wheel for aarch64 (Raspberry Pi OS 64-bit, Debian arm64): cross-builds it with maturin (the aarch64
# linker of .cargo/config.toml, as scripts/check_aarch64.sh), then imports it under qemu-user with Debian's
# arm64 CPython 3.11 and numpy's aarch64 wheel, runs the example model and compares with the x86-64 CLI.
# CI runs it after scripts/check_aarch64.sh, whose `cargo build --release --target aarch64-unknown-linux-gnu
# --workspace` leaves the extension built, so `PROFILE=release` here only packs the wheel:
#   PROFILE=release bash scripts/check_python_aarch64.sh     (default PROFILE=dev: a debug wheel, a full build)
#   WHEEL=target/wheels/tpu_sdk-...-manylinux2014_aarch64.whl bash scripts/check_python_aarch64.sh
#     (a wheel built elsewhere, e.g. by scripts/build_wheels.sh; nothing is built)
# The arm64 interpreter comes from Debian's archive through apt with a private state folder (nothing is
# installed on the host; `dpkg -x` unpacks it into a scratch root), numpy's wheel from PyPI (pip download); the
# tpu_sdk wheel is unpacked next to it (there is no pip in python3.11-minimal). The reference is the x86-64
# build of the same source: target/release/tpu-sdk on the same input (built when missing), compared by .venv's
# numpy (python3's when there is no .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
skip() {  # as scripts/check_aarch64.sh: a visible skip, a failure with TPU_SDK_REQUIRE_AARCH64=1
    echo "=== AARCH64 PYTHON WHEEL CHECK SKIPPED: $1 ==="
    if [ "${TPU_SDK_REQUIRE_AARCH64:-0}" = 1 ]; then exit 1; fi
    exit 0
}
command -v qemu-aarch64 >/dev/null || skip "qemu-aarch64 missing (apt-get install qemu-user)"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || skip "no apt-get/dpkg to fetch Debian's arm64 CPython"
[ -n "${WHEEL:-}" ] || command -v aarch64-linux-gnu-gcc >/dev/null \
    || skip "aarch64-linux-gnu-gcc missing (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
[ -x .venv-maturin/bin/maturin ] || { python3 -m venv .venv-maturin && .venv-maturin/bin/pip install --quiet "maturin>=1.7,<2"; }

work="${WORK:-$(mktemp -d)}"
if [ -n "${WHEEL:-}" ]; then
    wheel="$WHEEL"
else
    profile=()
    if [ "${PROFILE:-dev}" = release ]; then profile=(--release); fi
    .venv-maturin/bin/maturin build "${profile[@]}" --target aarch64-unknown-linux-gnu -m python/Cargo.toml -o "$work/wheels" 2>&1 \
        | grep -vE '^\s+(Compiling|Fresh)' || true
    wheel=$(ls "$work"/wheels/tpu_sdk-*aarch64*.whl | head -1)
fi
[ -f "$wheel" ] || { echo "check_python_aarch64.sh: no aarch64 wheel"; exit 1; }
echo "aarch64 wheel: $(basename "$wheel")"

# Debian's arm64 CPython and the libraries it links, unpacked into $work/root
apto=(-o "Dir::State=$work/apt/state" -o "Dir::State::status=$work/apt/status" -o "Dir::Cache=$work/apt/cache"
      -o APT::Architecture=arm64 -o APT::Architectures=arm64)
mkdir -p "$work/apt/state/lists/partial" "$work/apt/cache/archives/partial" "$work/debs" "$work/root" "$work/site"
touch "$work/apt/status"
apt-get "${apto[@]}" update -qq
(cd "$work/debs" && apt-get "${apto[@]}" download -qq python3.11-minimal libpython3.11-minimal libpython3.11-stdlib \
    libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 libuuid1 libsqlite3-0 \
    libncursesw6 libtinfo6 libreadline8 libcrypt1 libnsl2 libtirpc3 libdb5.3 libgdbm6 2>/dev/null)
for d in "$work"/debs/*.deb; do dpkg -x "$d" "$work/root"; done
"${PYTHON:-python3}" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
    --platform manylinux_2_28_aarch64 --python-version 3.11 -d "$work/wheels-arm64" "numpy>=2"
for w in "$work"/wheels-arm64/*.whl "$wheel"; do "${PYTHON:-python3}" -m zipfile -e "$w" "$work/site"; done

cat > "$work/check.py" <<'PY'
import platform, sys
import numpy as np
import tpu_sdk
x = np.linspace(0, 1, 1 * 3 * 48 * 192, dtype=np.float32).reshape(1, 3, 48, 192)
s = tpu_sdk.Session(sys.argv[1])
out = s.run({s.inputs[0].name: x})
y = next(iter(out.values()))
print(platform.machine(), tpu_sdk.__version__, y.dtype, y.shape, " ".join(f"{v:.6f}" for v in y.ravel()))
np.save(sys.argv[2], x)
np.save(sys.argv[3], y)
PY
model=examples/models/text_direction_cls.onnx
qemu-aarch64 -L "$work/root" -E PYTHONPATH="$work/site" "$work/root/usr/bin/python3.11" "$work/check.py" "$model" \
    "$work/x.npy" "$work/arm64.npy"

# the x86-64 build of the same source on the same input
[ -x target/release/tpu-sdk ] || cargo build --release -p tpu-sdk
./target/release/tpu-sdk run "$model" --input-shape x=1,3,48,192 --input "x=$work/x.npy" --output-dir "$work/x86_64" > /dev/null
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
"$py" - "$work" <<'PY'
import sys, numpy as np
work = sys.argv[1]
arm, ref = np.load(f"{work}/arm64.npy"), np.load(f"{work}/x86_64/output_0.npy")
assert arm.shape == ref.shape and arm.dtype == ref.dtype, (arm.shape, arm.dtype, ref.shape, ref.dtype)
np.testing.assert_allclose(arm, ref, rtol=1e-5, atol=1e-6)
print(f"aarch64 wheel under qemu: same outputs as the x86-64 CLI (max abs difference {np.abs(arm - ref).max():.3g})")
PY
echo "=== AARCH64 PYTHON WHEEL CHECK PASSED ==="
[ -n "${WORK:-}" ] || rm -rf "$work"
