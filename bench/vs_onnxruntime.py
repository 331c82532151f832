#!/usr/bin/env python3
"""Times one model on tpu-sdk's CPU target and on onnxruntime in the same run, and prints the ratio.

usage: vs_onnxruntime.py MODEL.onnx [--threads 2] [--iterations 50] [--warmup 5] [--tpu-sdk PATH]
                         [--input-shape NAME=D0,D1,...]

Both get the same random inputs (written to a temporary .npy and passed to `tpu-sdk bench --input`), the
same thread count and iteration count; onnxruntime runs with all graph optimisations on. The ratio is
tpu-sdk median latency / onnxruntime median latency (below 1: tpu-sdk is faster).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tpu-sdk", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tpu-sdk"))
    ap.add_argument("--input-shape", action="append", default=[])
    a = ap.parse_args()

    shapes = dict((s.split("=")[0], [int(d) for d in s.split("=")[1].split(",")]) for s in a.input_shape)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {}
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for i in sess.get_inputs():
            shape = shapes.get(i.name) or [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
            dt = DTYPES[i.type]
            x = (rng.random(shape) * 2 - 1).astype(dt) if np.issubdtype(dt, np.floating) else rng.integers(0, 4, shape).astype(dt)
            feeds[i.name] = x
            p = os.path.join(tmp, f"{i.name}.npy".replace("/", "_"))
            np.save(p, x)
            args += ["--input", f"{i.name}={p}"]
        for _ in range(a.warmup):
            sess.run(None, feeds)
        times = []
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            times.append(time.perf_counter() - t0)
        ort_median = float(np.median(times)) * 1e3
        cmd = [a.tpu_sdk, "--threads", str(a.threads), "bench", a.model, "--target", "cpu", "--iterations", str(a.iterations),
               "--warmup", str(a.warmup), "--json", *args]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"tpu-sdk bench failed ({out.returncode}): {out.stderr.strip()}")
        ours = json.loads(out.stdout)["latency_ms"]["median"]
    print(f"model:        {a.model}")
    print(f"threads:      {a.threads}, iterations {a.iterations}, warm-up {a.warmup}")
    print(f"onnxruntime:  {ort_median:.3f} ms median (onnxruntime {ort.__version__})")
    print(f"tpu-sdk cpu:  {ours:.3f} ms median")
    print(f"ratio:        {ours / ort_median:.2f}x onnxruntime's latency")
    print(json.dumps({"onnxruntime_ms": ort_median, "tpu_sdk_ms": ours, "ratio": ours / ort_median}))


if __name__ == "__main__":
    main()
