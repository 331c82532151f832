#!/usr/bin/env bash
# Release wheels of the Python package for PyPI: x86_64 and aarch64, both `manylinux2014` (glibc 2.17: every
# distribution since CentOS 7, Raspberry Pi OS Buster/Bullseye/Bookworm, Ubuntu 18.04+), one abi3 wheel per
# platform for CPython 3.9 and later. Zig (the `ziglang` wheel from PyPI) is the linker, with glibc 2.17's
# symbol versions, so no manylinux container or aarch64 sysroot is needed; maturin's audit checks the result.
#   bash scripts/build_wheels.sh [OUT_DIR]        (default target/wheels; ARCHES="x86_64 aarch64")
# Each platform is a full release build of the workspace (about 7 minutes on 2 cores). scripts/test_python.sh and
# scripts/check_python_aarch64.sh test wheels of the build machine's glibc; `WHEEL=... scripts/check_python_aarch64.sh`
# runs this script's aarch64 wheel under qemu, and a wheel installs anywhere with `pip install`.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/wheels}"
mkdir -p "$out"
if [ ! -x .venv-maturin/bin/maturin ] || ! .venv-maturin/bin/python -c 'import ziglang' 2>/dev/null; then
    [ -x .venv-maturin/bin/python ] || python3 -m venv .venv-maturin
    .venv-maturin/bin/pip install --quiet --disable-pip-version-check "maturin>=1.7,<2" "ziglang==0.17.1"
fi
# maturin finds zig as `python -m ziglang` through the first python3 on PATH
export PATH="$PWD/.venv-maturin/bin:$PATH"
for arch in ${ARCHES:-x86_64 aarch64}; do
    target="$arch-unknown-linux-gnu"
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    maturin build --release --zig --compatibility manylinux2014 --target "$target" -m python/Cargo.toml -o "$out" 2>&1 \
        | grep -vE '^\s+(Compiling|Fresh|Downloaded|Downloading)'
done
ls -l "$out"/tpu_sdk-*manylinux2014*.whl
