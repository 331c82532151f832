#!/usr/bin/env bash
# Cross-compiles tpu-sdk for aarch64 (Raspberry Pi OS 64-bit), runs the aarch64 binary under qemu-user on the
# example model, and checks its outputs against the x86-64 build's on the same input (f32: within 1e-5; three
# int8 models: every output byte equal).
# Needs: rustup target aarch64-unknown-linux-gnu, Debian's gcc-aarch64-linux-gnu + libc6-dev-arm64-cross, and
# qemu-user (qemu-aarch64). When one is missing it prints a visible "AARCH64 CHECK SKIPPED" line and exits 0,
# unless TPU_SDK_REQUIRE_AARCH64=1 (then it fails).
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
    echo "=== AARCH64 CHECK SKIPPED: $1 ==="
    if [ "${TPU_SDK_REQUIRE_AARCH64:-0}" = 1 ]; then exit 1; fi
    exit 0
}
rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 \
    || skip "rustup cannot install the aarch64-unknown-linux-gnu target"
command -v aarch64-linux-gnu-gcc >/dev/null || skip "aarch64-linux-gnu-gcc missing (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
command -v qemu-aarch64 >/dev/null || skip "qemu-aarch64 missing (apt-get install qemu-user)"

# The whole workspace: the CLI and the Python extension (scripts/check_python_aarch64.sh packs it into a wheel;
# with the same PYO3_* environment as this build it finds it fresh).
cargo build --release --target aarch64-unknown-linux-gnu --workspace
cargo build --release -p tpu-sdk
file target/aarch64-unknown-linux-gnu/release/tpu-sdk 2>/dev/null || true

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(run examples/models/text_direction_cls.onnx --input-shape x=1,3,48,192 --image examples/images/text_upside_down.png
      --mean 0.5 --std 0.5 --top-k 2 --labels examples/models/text_direction_cls.labels.txt)
./target/release/tpu-sdk "${args[@]}" --output-dir "$out/x86_64" | tee "$out/x86_64.txt"
qemu-aarch64 -L /usr/aarch64-linux-gnu target/aarch64-unknown-linux-gnu/release/tpu-sdk "${args[@]}" --output-dir "$out/aarch64" \
    | tee "$out/aarch64.txt"

# Same top class, and the scores equal to 1e-5 (kernels may fuse multiply-adds differently per architecture).
python3 - "$out" <<'PY'
import struct, sys, pathlib
out = pathlib.Path(sys.argv[1])
def npy_f32(p):
    b = p.read_bytes()
    n = struct.unpack("<H", b[8:10])[0]
    data = b[10 + n:]
    return struct.unpack(f"<{len(data) // 4}f", data)
a, b = npy_f32(out / "x86_64/output_0.npy"), npy_f32(out / "aarch64/output_0.npy")
assert len(a) == len(b), (len(a), len(b))
diff = max(abs(x - y) for x, y in zip(a, b))
top = lambda v: max(range(len(v)), key=lambda i: v[i])
exact = sum(x == y for x, y in zip(a, b))
print(f"aarch64 vs x86-64: {exact}/{len(a)} values bit-identical, max abs difference {diff:.3g}, top class {top(b)} vs {top(a)}")
assert top(a) == top(b), "top class differs between architectures"
assert diff <= 1e-5, f"outputs differ by {diff}"
PY
# int8 (TFLite, quantized end to end): every output byte equal between the architectures, on int8 models whose
# outputs are tensors of many values (the x86-64 build runs its AVX-512/AVX2 integer kernels, the aarch64 build the
# portable ones; both claim LiteRT's builtin kernels' bits, which the x86-64 test suite checks against LiteRT).
python3 - "$out" <<'PY'
import struct, pathlib, sys
out = pathlib.Path(sys.argv[1])
def npy_i8(path, shape, seed):
    # a deterministic int8 .npy (xorshift bytes)
    n = 1
    for d in shape:
        n *= d
    s, data = seed, bytearray()
    for _ in range(n):
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        data.append(s & 0xFF)
    header = "{'descr': '|i1', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(data))
npy_i8(out / "mbv2_in.npy", (1, 12, 12, 8), 7)
npy_i8(out / "opszoo_in.npy", (1, 8, 8, 4), 11)
npy_i8(out / "cnn_in.npy", (1, 16, 16, 3), 17)
PY
for m in mbv2_int8:mbv2_in opszoo_int8:opszoo_in cnn_int8:cnn_in; do
    model=core/tests/data/int8/${m%%:*}.tflite
    input=$out/${m##*:}.npy
    ./target/release/tpu-sdk run "$model" --input "$input" --output-dir "$out/${m%%:*}_x86_64" > /dev/null
    qemu-aarch64 -L /usr/aarch64-linux-gnu target/aarch64-unknown-linux-gnu/release/tpu-sdk run "$model" --input "$input" \
        --output-dir "$out/${m%%:*}_aarch64" > /dev/null
done
python3 - "$out" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
for m in ["mbv2_int8", "opszoo_int8", "cnn_int8"]:
    outs = sorted((out / f"{m}_x86_64").glob("output_*.npy"))
    assert outs, f"{m}: no outputs"
    for a in outs:
        b = out / f"{m}_aarch64" / a.name
        x, y = a.read_bytes(), b.read_bytes()
        differing = sum(p != q for p, q in zip(x, y)) + abs(len(x) - len(y))
        data = x[10 + int.from_bytes(x[8:10], "little"):]
        print(f"aarch64 vs x86-64 int8 {m} {a.name}: {len(data)} values, {len(set(data))} distinct, {differing} bytes differing")
        assert differing == 0, f"{m} {a.name}: int8 outputs differ between the architectures"
PY
echo "=== AARCH64 CHECK PASSED ==="
