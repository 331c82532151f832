#!/usr/bin/env python3
"""Text generation on tpu-sdk's CPU target and on onnxruntime, side by side: prefill latency and decode speed of
the same decoder ONNX file (a Llama-architecture model, seeded random weights, built by scripts/make_llm.py).

usage: llm_vs_onnxruntime.py [--model DIR_OR_ONNX] [--prompt-tokens 32] [--new-tokens 64] [--threads 1,2]
                             [--runs 5] [--tpu-sdk PATH]

Without --model it builds (once, cached in .cache/llm/bench) a 4-layer Llama (hidden 512, 8 heads, 4 KV heads,
vocab 8000, ~20M parameters, 80 MB of f32 weights) with the zoo's torch venv (.cache/zoo/venv-torch: torch and
transformers; `python3 zoo/build.py` creates it). onnxruntime runs the file the way HF optimum's
ORTModelForCausalLM does (scripts/ort_generate.py: all graph optimisations, the cache grown by concatenation);
tpu-sdk runs `tpu-sdk generate --json` (release build). Each side runs --runs times alternately, greedy, the same
prompt; reported: medians of prefill ms and decode tokens/s, and the ratios (prefill: tpu-sdk / onnxruntime
latency, below 1 is faster; decode: tpu-sdk / onnxruntime tokens/s, above 1 is faster). Both must produce the
same tokens (checked).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def ensure_model(path):
    if path:
        return path if path.endswith(".onnx") else os.path.join(path, "model.onnx")
    out = os.path.join(ROOT, ".cache", "llm", "bench")
    model = os.path.join(out, "model.onnx")
    if not os.path.exists(model):
        py = os.path.join(ROOT, ".cache", "zoo", "venv-torch", "bin", "python")
        if not os.path.exists(py):
            sys.exit("the benchmark model needs torch and transformers: run `python3 zoo/build.py` (creates "
                     ".cache/zoo/venv-torch) or give --model")
        subprocess.run([py, os.path.join(ROOT, "scripts", "make_llm.py"), out, "--arch", "llama", "--hidden", "512",
                        "--layers", "4", "--heads", "8", "--kv-heads", "4", "--vocab", "8000", "--new-tokens", "4"],
                       check=True, stderr=subprocess.DEVNULL)
    return model


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])}... failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tpu-sdk", default=os.path.join(ROOT, "target", "release", "tpu-sdk"))
    a = ap.parse_args()
    model = ensure_model(a.model)
    prompt = ",".join(str(10 + i) for i in range(a.prompt_tokens))
    py = sys.executable
    import onnxruntime
    print(f"model {model}: prompt {a.prompt_tokens} tokens, {a.new_tokens} new tokens, greedy; "
          f"onnxruntime {onnxruntime.__version__}; medians of {a.runs} runs")
    print(f"| threads | tpu-sdk prefill ms | onnxruntime prefill ms | prefill ratio | tpu-sdk decode tok/s | "
          f"onnxruntime decode tok/s | decode ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for threads in [int(t) for t in a.threads.split(",")]:
        ours, theirs = [], []
        for _ in range(a.runs):
            ours.append(run_json([a.tpu_sdk, "--threads", str(threads), "generate", model, "--input-ids", prompt,
                                  "--max-new-tokens", str(a.new_tokens), "--json"]))
            theirs.append(run_json([py, os.path.join(ROOT, "scripts", "ort_generate.py"), model, "--input-ids", prompt,
                                    "--max-new-tokens", str(a.new_tokens), "--threads", str(threads)]))
        if ours[0]["generated_ids"] != theirs[0]["generated_ids"]:
            sys.exit(f"the tokens differ: tpu-sdk {ours[0]['generated_ids'][:8]}..., "
                     f"onnxruntime {theirs[0]['generated_ids'][:8]}...")
        med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
        pf, pf_ort = med(ours, "prefill_ms"), med(theirs, "prefill_ms")
        dt, dt_ort = med(ours, "decode_tokens_per_s"), med(theirs, "decode_tokens_per_s")
        print(f"| {threads} | {pf:.1f} | {pf_ort:.1f} | {pf / pf_ort:.2f} | {dt:.1f} | {dt_ort:.1f} | {dt / dt_ort:.2f} |")


if __name__ == "__main__":
    main()
