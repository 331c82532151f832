"""Runs a .tflite model with LiteRT's optimized kernels (no XNNPACK, one thread), keeping every tensor:
dump_litert_tensors.py MODEL OUT_DIR IN_0.npy [IN_1.npy ...].

Writes OUT_DIR/t{INDEX}.npy for every tensor that holds data after the run and OUT_DIR/ops.txt: one line per
op in execution order, `OP_NAME<TAB>output tensor names separated by spaces`. The tests use it to name the
first op where the int8 CPU runtime and LiteRT part ways.
"""
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

model, out_dir, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
it = Interpreter(model_path=model, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                 num_threads=1, experimental_preserve_all_tensors=True)
it.allocate_tensors()
for d, path in zip(it.get_input_details(), inputs):
    it.set_tensor(d["index"], np.load(path))
it.invoke()
names = {}
for d in it.get_tensor_details():
    names[d["index"]] = d["name"]
    try:
        np.save(os.path.join(out_dir, f"t{d['index']}.npy"), it.get_tensor(d["index"]))
    except ValueError:
        pass
with open(os.path.join(out_dir, "ops.txt"), "w") as f:
    for op in it._get_ops_details():
        f.write(op["op_name"] + "\t" + " ".join(names[int(i)] + "=" + str(int(i)) for i in op["outputs"]) + "\n")
