#!/usr/bin/env python3
"""Greedy generation with onnxruntime, the way Hugging Face optimum's ORTModelForCausalLM runs a decoder export:
the cache grows by concatenation (exact lengths, no padding), an all-ones attention mask, position_ids counting
from the cache length; a no-cache export gets the whole sequence every step.

usage: ort_generate.py MODEL.onnx --input-ids 1,2,3 --max-new-tokens N --logits-out LOGITS.npy [--threads T]

Prints {"generated_ids": [...], "prefill_ms": ..., "decode_tokens_per_s": ...} as JSON; writes the logits each
token was picked from as float32 [tokens, vocab]. The tests compare `tpu-sdk generate` with it step by step; the
benchmark (bench/llm_vs_onnxruntime.py) times it.
"""
import argparse
import json
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input-ids", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--logits-out")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    so = ort.SessionOptions()
    if a.threads:
        so.intra_op_num_threads = a.threads
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in s.get_inputs()}
    outs = [o.name for o in s.get_outputs()]
    past_names = [n for n in ins if n.startswith("past_key_values.")]
    prompt = [int(x) for x in a.input_ids.split(",")]
    seq = list(prompt)
    past = None
    if past_names:
        shape = ins[past_names[0]].shape  # [batch, kv_heads, past, head_dim]
        past = {n: np.zeros((1, shape[1], 0, shape[3]), np.float32) for n in past_names}
    logits_all, times = [], []
    cur = prompt
    for step in range(a.max_new_tokens):
        t0 = time.perf_counter()
        if past is None:
            feeds = {"input_ids": np.array([seq], np.int64)}
            if "attention_mask" in ins:
                feeds["attention_mask"] = np.ones((1, len(seq)), np.int64)
            r = s.run(["logits"], feeds)
        else:
            plen = len(seq) - len(cur)
            feeds = {"input_ids": np.array([cur], np.int64)}
            if "attention_mask" in ins:
                feeds["attention_mask"] = np.ones((1, len(seq)), np.int64)
            if "position_ids" in ins:
                feeds["position_ids"] = np.arange(plen, len(seq), dtype=np.int64)[None]
            feeds.update(past)
            r = s.run(outs, feeds)
            res = dict(zip(outs, r))
            past = {n: res["present." + n[len("past_key_values."):]] for n in past_names}
            r = [res["logits"]]
        lg = r[0][0, -1].astype(np.float32)
        t = int(np.argmax(lg))
        times.append(time.perf_counter() - t0)
        logits_all.append(lg)
        seq.append(t)
        cur = [t]
    if a.logits_out:
        np.save(a.logits_out, np.stack(logits_all))
    decode = sum(times[1:])
    print(json.dumps({"generated_ids": seq[len(prompt):], "prefill_ms": times[0] * 1e3,
                      "decode_tokens_per_s": (len(times) - 1) / decode if decode > 0 else 0.0}))


if __name__ == "__main__":
    main()
