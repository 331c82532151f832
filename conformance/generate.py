#!/usr/bin/env python3
"""Regenerates the ONNX backend node test suite from the installed `onnx` package.

usage: generate.py OUT_DIR

onnx >= 1.23 no longer ships the node test data in its wheel, but every case is defined in Python under
onnx.backend.test.case.node; `collect_testcases()` rebuilds the models and computes the expected outputs
with onnx's own reference implementation. Each case becomes OUT_DIR/<name>/ with model.onnx,
input_<i>.npy and output_<i>.npy (the first data set). Cases whose data numpy's .npy format cannot hold
(sequences, optionals, strings, bfloat16/float8/int4 arrays), and cases whose graph has a sequence- or
optional-typed input or output (which the importer does not take), still get their model.onnx plus an
`unrepresentable.txt` saying why, so the Rust harness counts them as failures instead of hiding them.
"""
import os
import sys
import warnings

import numpy as np


def as_array(x):
    """numpy scalars and TensorProtos become arrays; anything else is returned as it is."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    if type(x).__name__ == "TensorProto":
        from onnx import numpy_helper

        return numpy_helper.to_array(x)
    return x


def representable(x):
    if not isinstance(x, np.ndarray):
        return f"a {type(x).__name__} value (not a tensor)"
    if x.dtype.kind not in "biuf" or x.dtype.names is not None:
        return f"dtype {x.dtype}"
    if x.dtype.kind == "u" and x.dtype.itemsize > 1:
        return f"dtype {x.dtype}"
    if x.dtype.kind == "f" and x.dtype.itemsize not in (2, 4, 8):
        return f"dtype {x.dtype}"
    if x.dtype.kind == "f" and x.dtype not in (np.float16, np.float32, np.float64):
        return f"dtype {x.dtype}"
    return None


def non_tensor_io(graph):
    """Why a graph with a sequence-, optional- or map-typed input or output cannot run here, or None."""
    for kind, vis in (("input", graph.input), ("output", graph.output)):
        for v in vis:
            t = v.type.WhichOneof("value")
            if t not in (None, "tensor_type"):
                return (
                    f"graph {kind} '{v.name}' is {t.replace('_type', '')}-typed: the importer takes tensor graph inputs and "
                    "outputs only (sequences are resolved inside the graph, a Loop's appended sequence as its scan output)"
                )
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    from onnx.backend.test.case.node import collect_testcases

    cases = collect_testcases()
    os.makedirs(out, exist_ok=True)
    n_ok = n_unrep = 0
    for case in cases:
        if case.kind != "node" or case.model is None:
            continue
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        with open(os.path.join(d, "op.txt"), "w") as f:
            f.write(" ".join(sorted({n.op_type for n in case.model.graph.node})) + "\n")
        if not case.data_sets:
            with open(os.path.join(d, "unrepresentable.txt"), "w") as f:
                f.write("the case has no data set\n")
            n_unrep += 1
            continue
        inputs, outputs = case.data_sets[0]
        inputs = [as_array(x) for x in inputs]
        outputs = [as_array(x) for x in outputs]
        why = non_tensor_io(case.model.graph)
        for kind, arrays in (("input", inputs), ("output", outputs)):
            for i, x in enumerate(arrays):
                r = representable(x)
                if r is not None and why is None:
                    why = f"its data cannot be stored as .npy ({kind} {i}: {r})"
        if why:
            with open(os.path.join(d, "unrepresentable.txt"), "w") as f:
                f.write(why + "\n")
            n_unrep += 1
            continue
        for kind, arrays in (("input", inputs), ("output", outputs)):
            for i, x in enumerate(arrays):
                np.save(os.path.join(d, f"{kind}_{i}.npy"), np.asarray(x, order="C"))
        n_ok += 1
    print(f"wrote {n_ok} cases to {out} ({n_unrep} more that cannot run here, each with an unrepresentable.txt saying why)")


if __name__ == "__main__":
    main()
