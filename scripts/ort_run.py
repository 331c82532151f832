#!/usr/bin/env python3
"""Runs a model on onnxruntime (CPU, one thread, all graph optimisations off so the numbers are onnxruntime's
kernels, not its fusions) and writes its outputs as OUT_DIR/output_<i>.npy.

usage: ort_run.py [--reference] MODEL.onnx OUT_DIR NAME=INPUT.npy [NAME=INPUT.npy ...]

--reference: run onnx's reference evaluator (onnx.reference.ReferenceEvaluator) instead, for what onnxruntime
does not implement (batch-major recurrent layers, `layout=1`).
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    argv = sys.argv[1:]
    reference = bool(argv) and argv[0] == "--reference"
    if reference:
        argv = argv[1:]
    if len(argv) < 2:
        sys.exit(__doc__)
    model, out = argv[0], argv[1]
    feeds = {}
    for a in argv[2:]:
        name, path = a.split("=", 1)
        feeds[name] = np.load(path)
    if reference:
        from onnx.reference import ReferenceEvaluator

        results = ReferenceEvaluator(model).run(None, feeds)
    else:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        results = sess.run(None, feeds)
    os.makedirs(out, exist_ok=True)
    for i, y in enumerate(results):
        # np.ascontiguousarray would turn a scalar (0-d) output into shape (1,)
        np.save(os.path.join(out, f"output_{i}.npy"), np.asarray(y, order="C"))


if __name__ == "__main__":
    main()
