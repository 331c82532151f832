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
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


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
        for _ in range(a.warmup):
            it.invoke()
        times = []
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            it.invoke()
            times.append(time.perf_counter() - t0)
        litert = float(np.median(times)) * 1e3
        cmd = [a.tpu_sdk, "--threads", str(a.threads), "bench", a.model, "--target", "cpu", "--iterations",
               str(a.iterations), "--warmup", str(a.warmup), "--json", *args]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"tpu-sdk bench failed ({out.returncode}): {out.stderr.strip()}")
        ours = json.loads(out.stdout)["latency_ms"]["median"]
    print(f"model:        {a.model}")
    print(f"threads:      {a.threads}, iterations {a.iterations}, warm-up {a.warmup}")
    print(f"LiteRT:       {litert:.3f} ms median ({a.resolver})")
    print(f"tpu-sdk cpu:  {ours:.3f} ms median")
    print(f"ratio:        {ours / litert:.2f}x LiteRT's latency")
    print(json.dumps({"litert_ms": litert, "tpu_sdk_ms": ours, "ratio": ours / litert}))


if __name__ == "__main__":
    main()
