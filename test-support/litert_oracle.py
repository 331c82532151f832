"""The LiteRT oracle of the Rust tests (tpu_sdk_test_support::litert): litert_oracle.py MODEL RESOLVER DIR N.

Runs MODEL on DIR/case{i}.input_{k}.npy for i in 0..N with LiteRT's CPU interpreter and writes
DIR/case{i}.{RESOLVER}.output_{k}.npy (subgraph input/output order). RESOLVER is an OpResolverType name:
BUILTIN_WITHOUT_DEFAULT_DELEGATES (the builtin optimized kernels, no XNNPACK) or BUILTIN_REF (the reference
kernels). Exits with status 3 when this resolver cannot run the model. Needs the ai-edge-litert package.
Variable tensors (a recurrent op's states) are reset before each input set, so every set starts from the
initial state as on a fresh interpreter.
"""
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

model, resolver, d, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
try:
    it = Interpreter(model_path=model, experimental_op_resolver_type=getattr(OpResolverType, resolver), num_threads=1)
    it.allocate_tensors()
except (ValueError, RuntimeError) as e:
    # e.g. the reference resolver lacks an op version the optimized one has
    print(f"unavailable: {e}".splitlines()[0], file=sys.stderr)
    sys.exit(3)
ins, outs = it.get_input_details(), it.get_output_details()
for i in range(n):
    it.reset_all_variables()
    for k, det in enumerate(ins):
        it.set_tensor(det["index"], np.load(os.path.join(d, f"case{i}.input_{k}.npy")))
    it.invoke()
    for k, det in enumerate(it.get_output_details()):
        if 0 in det["shape"]:
            # an output of no elements (a WHILE's scan output after zero trips): get_tensor refuses its null
            # buffer ("Invalid tensor size"), the shape LiteRT computed is the result
            value = np.zeros(det["shape"], det["dtype"])
        else:
            value = it.get_tensor(det["index"])
        np.save(os.path.join(d, f"case{i}.{resolver}.output_{k}.npy"), value)
