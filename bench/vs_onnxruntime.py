#!/usr/bin/env python3
"""Times one model on tpu-sdk's CPU target and on onnxruntime in the same run, and prints the ratio.

usage: vs_onnxruntime.py MODEL.onnx [--threads 2] [--iterations 50] [--warmup 5] [--tpu-sdk PATH]
                         [--input-shape NAME=D0,D1,...]

Both get the same random inputs (written to a temporary .npy and passed to `tpu-sdk bench --input`), the
same thread count and iteration count; onnxruntime runs with all graph optimisations on. The ratio is
tpu-sdk median latency / onnxruntime median latency (below 1: tpu-sdk is faster).
"""
import argparse
import os
import tempfile

import numpy as np
import onnxruntime as ort

import timing

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
        ort_median = timing.median_ms(lambda: sess.run(None, feeds), a.iterations, a.warmup)
        ours = timing.tpu_sdk_median_ms(a, args)
    timing.report(a, "onnxruntime", ort_median, f"onnxruntime {ort.__version__}", ours)


if __name__ == "__main__":
    main()
