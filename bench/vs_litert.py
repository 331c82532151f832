#!/usr/bin/env python3
"""Times one int8 .tflite model on tpu-sdk's CPU target and on LiteRT in the same run, and prints the ratio.

usage: vs_litert.py [MODEL.tflite] [--threads 2] [--iterations 50] [--warmup 5] [--tpu-sdk PATH]
                    [--resolver BUILTIN_WITHOUT_DEFAULT_DELEGATES|BUILTIN|BUILTIN_REF]

Both get the same random inputs (written to a temporary .npy and passed to `tpu-sdk bench --input`) and the
same thread and iteration counts. LiteRT runs with the given op resolver (default: its builtin optimized
kernels without XNNPACK, the kernels tpu-sdk's int8 runtime is bit-exact with). The ratio is tpu-sdk median
latency / LiteRT median latency (below 1: tpu-sdk is faster). MODEL defaults to the MobileNetV2 (width
0.35, 96x96) int8 fixture, core/tests/data/int8/mobilenetv2_int8.tflite. Needs a release build of the CLI
(`cargo build --release -p tpu-sdk`).
"""
import argparse
import os
import tempfile

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import timing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "core", "tests", "data", "int8", "mobilenetv2_int8.tflite"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--resolver", default="BUILTIN_WITHOUT_DEFAULT_DELEGATES")
    ap.add_argument("--tpu-sdk", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tpu-sdk"))
    a = ap.parse_args()

    it = Interpreter(model_path=a.model, num_threads=a.threads,
                     experimental_op_resolver_type=getattr(OpResolverType, a.resolver))
    it.allocate_tensors()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for k, d in enumerate(it.get_input_details()):
            dt = d["dtype"]
            if np.issubdtype(dt, np.integer):
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max + 1, d["shape"]).astype(dt)
            else:
                x = (rng.random(d["shape"]) * 2 - 1).astype(dt)
            it.set_tensor(d["index"], x)
            p = os.path.join(tmp, f"input_{k}.npy")
            np.save(p, x)
            args += ["--input", p]
        litert = timing.median_ms(it.invoke, a.iterations, a.warmup)
        ours = timing.tpu_sdk_median_ms(a, args)
    timing.report(a, "LiteRT", litert, a.resolver, ours)


if __name__ == "__main__":
    main()
