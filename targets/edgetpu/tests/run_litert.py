"""Runs a .tflite model with LiteRT's reference kernels: run_litert.py MODEL OUT_DIR IN_0.npy [IN_1.npy ...].

Writes OUT_DIR/output_K.npy for each model output, in the subgraph's output order. Used by the Rust tests
as the LiteRT oracle (needs the ai-edge-litert package).
"""
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

model, out_dir, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
it = Interpreter(model_path=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors()
details = it.get_input_details()
if len(details) != len(inputs):
    sys.exit(f"the model has {len(details)} inputs, {len(inputs)} given")
for d, path in zip(details, inputs):
    it.set_tensor(d["index"], np.load(path))
it.invoke()
for k, d in enumerate(it.get_output_details()):
    np.save(os.path.join(out_dir, f"output_{k}.npy"), it.get_tensor(d["index"]))
