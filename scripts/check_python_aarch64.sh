#!/usr/bin/env bash
# The Python wheel for aarch64 (Raspberry Pi OS 64-bit, Debian arm64): cross-builds it with maturin (the aarch64
# linker of .cargo/config.toml, as scripts/check_aarch64.sh), then imports it under qemu-user with Debian's
# arm64 CPython 3.11 and numpy's aarch64 wheel, runs the example model and compares with the x86-64 package.
# Not part of CI (a second full build of the workspace for aarch64); run it by hand on a Debian host:
#   bash scripts/check_python_aarch64.sh            (PROFILE=release for a release wheel; default dev)
# The arm64 interpreter comes from Debian's archive through apt with a private state folder (nothing is
# installed on the host; `dpkg -x` unpacks it into a scratch root), numpy's wheel from PyPI (pip download); the
# tpu_sdk wheel is unpacked next to it (there is no pip in python3.11-minimal). X86_PYTHON: a Python with the
# x86-64 tpu_sdk installed, to compare with (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v qemu-aarch64 >/dev/null || { echo "qemu-aarch64 missing (apt-get install qemu-user)"; exit 1; }
command -v aarch64-linux-gnu-gcc >/dev/null || { echo "aarch64-linux-gnu-gcc missing"; exit 1; }
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
[ -x .venv-maturin/bin/maturin ] || { python3 -m venv .venv-maturin && .venv-maturin/bin/pip install --quiet "maturin>=1.7,<2"; }

work="${WORK:-$(mktemp -d)}"
profile=()
if [ "${PROFILE:-dev}" = release ]; then profile=(--release); fi
.venv-maturin/bin/maturin build "${profile[@]}" --target aarch64-unknown-linux-gnu -m python/Cargo.toml -o "$work/wheels" 2>&1 \
    | grep -vE '^\s+(Compiling|Fresh)' || true
wheel=$(ls "$work"/wheels/tpu_sdk-*aarch64*.whl | head -1)

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
out = tpu_sdk.Session(sys.argv[1]).run({"x": x})
y = next(iter(out.values()))
print(platform.machine(), tpu_sdk.__version__, y.dtype, y.shape, " ".join(f"{v:.6f}" for v in y.ravel()))
np.save(sys.argv[2], y)
PY
model=examples/models/text_direction_cls.onnx
qemu-aarch64 -L "$work/root" -E PYTHONPATH="$work/site" "$work/root/usr/bin/python3.11" "$work/check.py" "$model" "$work/arm64.npy"
"${X86_PYTHON:-python3}" - "$model" "$work" <<'PY'
import sys, numpy as np, importlib.util
work = sys.argv[2]
spec = importlib.util.find_spec("tpu_sdk")
ref = None
if spec is not None:
    import tpu_sdk
    x = np.linspace(0, 1, 1 * 3 * 48 * 192, dtype=np.float32).reshape(1, 3, 48, 192)
    ref = next(iter(tpu_sdk.Session(sys.argv[1]).run({"x": x}).values()))
arm = np.load(f"{work}/arm64.npy")
if ref is None:
    print("aarch64 ran; no x86-64 tpu_sdk here to compare with")
else:
    np.testing.assert_allclose(arm, ref, rtol=1e-5, atol=1e-6)
    print("aarch64 wheel: same outputs as x86-64 (1e-5)")
PY
[ -n "${WORK:-}" ] || rm -rf "$work"
