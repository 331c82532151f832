#!/usr/bin/env python3
"""Per-token host overhead of `tpu-sdk generate` on the PJRT path against JAX driving the *same* StableHLO decode
program through its own PJRT client, in one run.

    .venv/bin/python bench/llm_vs_jax.py [--model cli/tests/data/llm/llama/model.onnx] [--new-tokens 64]
                                         [--bucket 128] [--tpu-sdk target/release/tpu-sdk]

1. `tpu-sdk generate MODEL --emit-stablehlo` writes the prefill and decode programs (cache inputs aliased to the
   cache outputs, weights embedded);
2. `tpu-sdk generate MODEL --target cloud-tpu --json` generates greedily on the XLA CPU plugin: its decode
   tokens/s is the time per decode step seen from the host (upload of ids, mask, positions; execute with the cache
   donated; download of the logits; argmax; bookkeeping);
3. JAX (jaxlib's CPU client) compiles the same two programs and runs the same loop in Python: the cache buffers
   stay on the device and are donated each step (the module's `tf.aliasing_output`), the small inputs are put,
   the logits fetched and argmaxed with numpy.
Both must produce the same tokens. Prints the median time per decode step of both and ours as a ratio to JAX
(lower is better). A small model makes the per-token overhead dominate; a large one measures the program.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# JAX on the CPU only: with the libtpu package installed it would otherwise initialise the TPU backend, which off
# a TPU VM must not look for a metadata server (the project's rule for loading libtpu).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
for _k, _v in (("TPU_SKIP_MDS_QUERY", "1"), ("TPU_ACCELERATOR_TYPE", "v5litepod-4"), ("TPU_WORKER_ID", "0"),
               ("TPU_WORKER_HOSTNAMES", "localhost")):
    os.environ.setdefault(_k, _v)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "cli", "tests", "data", "llm", "llama", "model.onnx"))
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--bucket", type=int, default=128)
    ap.add_argument("--tpu-sdk", default=os.path.join(ROOT, "target", "release", "tpu-sdk"))
    a = ap.parse_args()
    import fastatomstruct_xla_cpu
    import jax
    from jax._src.lib import xla_client as xc

    jax.config.update("jax_enable_x64", True)  # the programs take i64 ids, mask and positions

    plugin = fastatomstruct_xla_cpu.library_path()
    prompt = [3 + i for i in range(a.prompt_tokens)]
    ids_arg = ",".join(map(str, prompt))
    with tempfile.TemporaryDirectory() as tmp:
        sh([a.tpu_sdk, "generate", a.model, "--emit-stablehlo", "--output-dir", tmp, "--buckets", str(a.bucket)])
        manifest = json.load(open(os.path.join(tmp, "manifest.json")))
        progs = {p["kind"]: p for p in manifest["programs"] if p["cache_positions"] == a.bucket}
        # ours: best of 3 runs
        docs = [json.loads(sh([a.tpu_sdk, "generate", a.model, "--target", "cloud-tpu", "--plugin", plugin, "--input-ids", ids_arg,
                               "--max-new-tokens", str(a.new_tokens), "--buckets", str(a.bucket), "--json"])) for _ in range(3)]
        ours_step = statistics.median(1.0 / d["decode_tokens_per_s"] for d in docs)
        ours_tokens = docs[0]["generated_ids"]

        dev = jax.devices("cpu")[0]
        load = lambda kind: dev.client.compile_and_load(open(os.path.join(tmp, progs[kind]["file"])).read(), [dev],  # noqa: E731
                                                        xc.CompileOptions())
        prefill, decode = load("prefill"), load("decode")
        inputs = progs["decode"]["inputs"]
        cache_names = [n for n in inputs if n.startswith("past_key_values.")]

    def run(exe, names, feeds, cache):
        args = []
        for name in names:
            args.append(cache[name] if name in cache else jax.device_put(feeds[name], dev))
        outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        logits = np.asarray(outs[0][0])
        new_cache = {n: outs[1 + k][0] for k, n in enumerate(cache_names)}
        return logits, new_cache

    P, S, n = a.bucket, progs["prefill"]["tokens"], len(prompt)
    # zeros for the cache: [1, kv_heads, P, head_dim], from the model's declared past inputs
    import onnx
    m = onnx.load(a.model, load_external_data=False)
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    zeros = {name: jax.device_put(np.zeros((1, dims[name][1], P, dims[name][3]), np.float32), dev) for name in cache_names}
    ids = np.zeros((1, S), np.int64)
    ids[0, :n] = prompt
    mask = np.zeros((1, P + S), np.int64)
    mask[0, P:P + n] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": np.arange(S, dtype=np.int64)[None],
             "tpu_sdk.cache_len": np.array([0], np.int64), "tpu_sdk.new_count": np.array([n], np.int64),
             # the prefill computes the logits of the last prompt token only (passes::logits_row)
             "tpu_sdk.logits_row": np.array([n - 1], np.int64)}
    logits, cache = run(prefill, progs["prefill"]["inputs"], feeds, zeros)
    tokens = [int(np.argmax(logits[0, -1] if logits.shape[1] == 1 else logits[0, n - 1]))]
    length, times = n, []
    while len(tokens) < a.new_tokens:
        t0 = time.perf_counter()
        if "tpu_sdk.write_index" in inputs:
            # the decode program writes the new position into the cache at `length`: the mask is laid out like
            # the cache (the filled positions and the new one)
            mask = np.zeros((1, P), np.int64)
            mask[0, :length + 1] = 1
            step = {"tpu_sdk.write_index": np.array([length], np.int64)}
        else:
            mask = np.zeros((1, P + 1), np.int64)
            mask[0, :length] = 1
            mask[0, P] = 1
            step = {"tpu_sdk.cache_len": np.array([length], np.int64), "tpu_sdk.new_count": np.array([1], np.int64)}
        feeds = {"input_ids": np.array([[tokens[-1]]], np.int64), "attention_mask": mask,
                 "position_ids": np.array([[length]], np.int64), **step}
        logits, cache = run(decode, inputs, feeds, cache)
        tokens.append(int(np.argmax(logits[0, 0])))
        length += 1
        times.append(time.perf_counter() - t0)
    jax_step = statistics.median(times)
    if tokens != ours_tokens:
        sys.exit(f"the tokens differ: tpu-sdk {ours_tokens[:8]}..., JAX {tokens[:8]}...")
    print(f"model {a.model}, cache bucket {P}, {a.new_tokens} tokens (the same from both)")
    print(f"per decode step: tpu-sdk {ours_step * 1e3:.3f} ms, JAX {jax_step * 1e3:.3f} ms, "
          f"ratio {ours_step / jax_step:.2f}x (lower is better)")


if __name__ == "__main__":
    main()
