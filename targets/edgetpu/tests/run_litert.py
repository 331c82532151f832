"""Runs a .tflite model with LiteRT: run_litert.py [--resolver=NAME] MODEL OUT_DIR IN_0.npy [IN_1.npy ...].

Writes OUT_DIR/output_K.npy for each model output, in the subgraph's output order. NAME is an OpResolverType
name: BUILTIN_REF (LiteRT's reference kernels, the default) or BUILTIN_WITHOUT_DEFAULT_DELEGATES (the builtin
optimized kernels without XNNPACK, which the int8 CPU runtime matches bit for bit); one thread. Used by the
Rust tests as the LiteRT oracle (needs the ai-edge-litert package).
"""
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

args = sys.argv[1:]
resolver = "BUILTIN_REF"
if args and args[0].startswith("--resolver="):
    resolver = args.pop(0).split("=", 1)[1]
model, out_dir, inputs = args[0], args[1], args[2:]
it = Interpreter(model_path=model, experimental_op_resolver_type=getattr(OpResolverType, resolver), num_threads=1)
it.allocate_tensors()
details = it.get_input_details()
if len(details) != len(inputs):
    sys.exit(f"the model has {len(details)} inputs, {len(inputs)} given")
for d, path in zip(details, inputs):
    it.set_tensor(d["index"], np.load(path))
it.invoke()
for k, d in enumerate(it.get_output_details()):
    np.save(os.path.join(out_dir, f"output_{k}.npy"), it.get_tensor(d["index"]))
