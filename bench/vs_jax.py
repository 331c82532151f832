#!/usr/bin/env python3
"""Our cloud-tpu runtime against JAX's CPU backend on the same StableHLO, in one run.

    .venv/bin/python bench/vs_jax.py [MODEL.onnx] [--batch 8] [--iterations 200] [--tpu-sdk target/release/tpu-sdk]

1. `tpu-sdk compile MODEL --target cloud-tpu -o model.mlir` writes our lowering (every weight embedded);
2. `tpu-sdk bench MODEL --target cloud-tpu --json` times our runtime (PJRT C API, XLA CPU plugin);
3. JAX (jaxlib's CPU client) compiles the *same* StableHLO text and is timed the same way: upload the
   inputs, execute, download the outputs, per call;
4. both stacks also run a one-element program, whose latency is the per-call overhead.

Prints the per-call overhead and the throughput of both, and ours as a ratio to JAX (overhead: lower is better;
throughput: higher is better). Without MODEL a two-layer MLP (64 -> 512 -> 64, ReLU) is generated. Needs numpy,
onnx and jax[cpu] (scripts/requirements.txt).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# JAX on the CPU only: with the libtpu package installed it would otherwise initialise the TPU backend, which off
# a TPU VM must not look for a metadata server (the project's rule for loading libtpu).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
for _k, _v in (("TPU_SKIP_MDS_QUERY", "1"), ("TPU_ACCELERATOR_TYPE", "v5litepod-4"), ("TPU_WORKER_ID", "0"),
               ("TPU_WORKER_HOSTNAMES", "localhost")):
    os.environ.setdefault(_k, _v)


def make_mlp(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((64, 512)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((512, 64)) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def make_tiny(path):
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def plugin_args():
    """`--plugin PATH` of the XLA CPU plugin package of this interpreter, if installed (else tpu-sdk searches)."""
    try:
        import fastatomstruct_xla_cpu

        return ["--plugin", fastatomstruct_xla_cpu.library_path()]
    except ImportError:
        return []


def ours(tpu_sdk, model, batch, iterations, tmp, tag):
    """(median latency in seconds, where to put x.npy and our outputs, StableHLO text)."""
    mlir = os.path.join(tmp, f"{tag}.mlir")
    sh([tpu_sdk, "compile", model, "--target", "cloud-tpu", "--dim", f"batch={batch}", "-o", mlir] + plugin_args())
    doc = json.loads(sh([tpu_sdk, "bench", model, "--target", "cloud-tpu", "--dim", f"batch={batch}", "--json",
                         "--iterations", str(iterations), "--warmup", "20"] + plugin_args()))
    x_path = os.path.join(tmp, f"{tag}_x.npy")
    out_dir = os.path.join(tmp, f"{tag}_out")
    return doc["latency_ms"]["median"] / 1e3, x_path, out_dir, open(mlir).read()


def jax_time(mlir, x, iterations):
    import jax
    from jax._src.lib import xla_client as xc

    dev = jax.devices("cpu")[0]
    exe = dev.client.compile_and_load(mlir, [dev], xc.CompileOptions())

    def call():
        r = exe.execute_sharded([jax.device_put(x, dev)])
        return np.asarray(r.disassemble_into_single_device_arrays()[0][0])

    for _ in range(20):
        y = call()
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times), y


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="an ONNX model with one f32 input whose first dim is 'batch'")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--tpu-sdk", default=None, help="the tpu-sdk binary (default: target/release, else target/debug)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tpu_sdk = a.tpu_sdk or next(
        (p for p in (os.path.join(root, "target", d, "tpu-sdk") for d in ("release", "debug")) if os.path.exists(p)), None)
    if not tpu_sdk:
        sys.exit("build tpu-sdk first (cargo build --release -p tpu-sdk) or pass --tpu-sdk")
    env_cache = os.environ.get("TPU_SDK_COMPILE_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("TPU_SDK_COMPILE_CACHE", os.path.join(tmp, "cache"))
        model = a.model or os.path.join(tmp, "mlp.onnx")
        if not a.model:
            make_mlp(model)
        tiny = os.path.join(tmp, "tiny.onnx")
        make_tiny(tiny)

        rows = []
        for tag, path, batch in (("overhead", tiny, 1), ("model", model, a.batch)):
            lat, x_path, out_dir, mlir = ours(tpu_sdk, path, batch, a.iterations, tmp, tag)
            import onnx

            inp = onnx.load(path).graph.input[0]
            dims = [d.dim_value if d.dim_value else batch for d in inp.type.tensor_type.shape.dim]
            x = np.random.default_rng(1).standard_normal(dims).astype(np.float32)
            np.save(x_path, x)
            sh([tpu_sdk, "run", path, "--target", "cloud-tpu", "--input", x_path, "--output-dir", out_dir] + plugin_args())
            y_ours = np.load(os.path.join(out_dir, "output_0.npy"))
            jlat, y_jax = jax_time(mlir, x, a.iterations)
            diff = float(np.max(np.abs(y_ours - y_jax))) if y_ours.size else 0.0
            rows.append((tag, batch, lat, jlat, diff))
        if env_cache is None:
            del os.environ["TPU_SDK_COMPILE_CACHE"]

    (_, _, o_lat, o_jlat, o_diff), (_, batch, m_lat, m_jlat, m_diff) = rows
    print(f"per-call overhead (1-element program): ours {o_lat * 1e6:.1f} us, JAX {o_jlat * 1e6:.1f} us, "
          f"ratio {o_lat / o_jlat:.2f}x (lower is better)")
    print(f"throughput (batch {batch}): ours {batch / m_lat:.0f}/s, JAX {batch / m_jlat:.0f}/s, "
          f"ratio {m_jlat / m_lat:.2f}x (higher is better); median latency ours {m_lat * 1e3:.3f} ms, JAX {m_jlat * 1e3:.3f} ms")
    print(f"same StableHLO, outputs agree to {max(o_diff, m_diff):.2e} (max abs difference)")


if __name__ == "__main__":
    main()
