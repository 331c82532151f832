#!/usr/bin/env python3
"""Runs a model on onnxruntime (CPU, one thread, all graph optimisations off so the numbers are onnxruntime's
kernels, not its fusions) and writes its outputs as OUT_DIR/output_<i>.npy.

usage: ort_run.py MODEL.onnx OUT_DIR NAME=INPUT.npy [NAME=INPUT.npy ...]
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model, out = sys.argv[1], sys.argv[2]
    feeds = {}
    for a in sys.argv[3:]:
        name, path = a.split("=", 1)
        feeds[name] = np.load(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    os.makedirs(out, exist_ok=True)
    for i, y in enumerate(sess.run(None, feeds)):
        np.save(os.path.join(out, f"output_{i}.npy"), np.ascontiguousarray(y))


if __name__ == "__main__":
    main()
