#!/usr/bin/env python3
"""Small decoder LLMs with seeded random weights, exported to ONNX as people export them, plus transformers' own
greedy output as the reference for `tpu-sdk generate`.

usage: make_llm.py OUT_DIR [--arch llama|qwen2] [--seed 0]

Run with the zoo's torch venv (`.cache/zoo/venv-torch/bin/python`: torch, transformers, tokenizers, onnx). Writes
into OUT_DIR:
- tokenizer.json: a byte-level BPE trained on a fixed English text (HF `tokenizers`), whose vocabulary size is the
  model's;
- model.onnx: the cache form, `torch.onnx.export` (TorchScript exporter) of `<Arch>ForCausalLM` with inputs
  input_ids i64 [batch, seq], attention_mask i64 [batch, past+seq], position_ids i64 [batch, seq],
  past_key_values.{i}.key|value f32 [batch, kv_heads, past, head_dim] and outputs logits [batch, seq, vocab],
  present.{i}.key|value — the layout of HF optimum's decoder exports; every length a symbolic dim;
- model_nocache.onnx: input_ids, attention_mask → logits only;
- with --no-positions, model_nopos.onnx: the cache form without position_ids (the model numbers positions from
  the cache length, so it can only be run with exact lengths);
- reference.json: for each prompt (token ids), the ids transformers' `generate` (greedy, PyTorch, CPU) produces,
  and the config.
Grouped-query attention (kv_heads < heads), RoPE, RMSNorm and SwiGLU come with both architectures; Qwen2 adds
biases to q/k/v. Eager attention, so the exported graph materialises the mask from attention_mask (SDPA's tracing
shortcuts could bake an all-ones mask in).
"""
import argparse
import json
import os

import numpy as np
import torch
import transformers as T

TEXT = """The quick brown fox jumps over the lazy dog. A small language model learns to predict the next token from
the ones before it. Tensor processing units run matrix multiplications in systolic arrays; the edge version runs
eight-bit integer models on a USB stick next to a Raspberry Pi. Voice activity detectors, keyword spotters and text
recognizers are recurrent; detectors and classifiers are convolutional. Generation keeps a cache of keys and values
for every layer so that each new token attends to all previous ones without recomputing them. Greedy decoding picks
the most likely token; sampling draws from the distribution after temperature, top-k and nucleus filtering."""

PROMPTS = [[1], [5, 17, 42], list(range(3, 3 + 13)), [7] * 5 + list(range(100, 121))]
# minGPT's character vocabulary (the characters of Tiny Shakespeare)
CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def tokenizer(out, vocab):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TEXT] * 4, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    return tok.get_vocab_size()


def model(arch, vocab, seed, hidden=64, layers=2, heads=4, kv_heads=2):
    torch.manual_seed(seed)
    kw = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
              intermediate_size=hidden * 2 if hidden <= 64 else hidden * 8 // 3,
              vocab_size=vocab, max_position_embeddings=1024, initializer_range=0.1, bos_token_id=0, eos_token_id=1,
              pad_token_id=None, tie_word_embeddings=False)
    if arch == "gpt2":
        cfg = T.GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=vocab, n_positions=256,
                           initializer_range=0.1, bos_token_id=0, eos_token_id=0)
        m = T.GPT2LMHeadModel(cfg)
    elif arch == "llama":
        cfg = T.LlamaConfig(**kw)
        m = T.LlamaForCausalLM(cfg)
    else:
        cfg = T.Qwen2Config(**kw)
        m = T.Qwen2ForCausalLM(cfg)
    cfg._attn_implementation = "eager"
    m.config._attn_implementation = "eager"
    return m.eval(), cfg


class WithCache(torch.nn.Module):
    def __init__(self, m, layers):
        super().__init__()
        self.m, self.layers = m, layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = T.DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                     past_key_values=cache, use_cache=True)
        pres = []
        for layer in out.past_key_values.layers:
            pres += [layer.keys, layer.values]
        return (out.logits, *pres)


class WithCacheNoPositions(WithCache):
    def forward(self, input_ids, attention_mask, *past):
        return super().forward(input_ids, attention_mask, None, *past)


class NoCache(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="llama", choices=["llama", "qwen2", "gpt2"],
                    help="gpt2: a minGPT-style character model (vocabulary: CHARS, written to chars.json, no tokenizer)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=64, help="model width (benchmarks: 512)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=0, help="model vocabulary, at least the tokenizer's (default: the tokenizer's)")
    ap.add_argument("--no-positions", action="store_true",
                    help="also write model_nopos.onnx: the cache form without position_ids (positions follow the cache)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.arch == "gpt2":
        vocab = len(CHARS)
        json.dump(list(CHARS), open(os.path.join(a.out, "chars.json"), "w"))
    else:
        vocab = max(tokenizer(a.out, 512), a.vocab)
    m, cfg = model(a.arch, vocab, a.seed, a.hidden, a.layers, a.heads, a.kv_heads)
    L, hd = cfg.num_hidden_layers, cfg.hidden_size // cfg.num_attention_heads
    kvh = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads

    past_len, seq = 3, 2
    ids = torch.tensor([[4, 9]], dtype=torch.int64)
    mask = torch.ones(1, past_len + seq, dtype=torch.int64)
    pos = torch.tensor([[past_len, past_len + 1]], dtype=torch.int64)
    past = [torch.randn(1, kvh, past_len, hd) for _ in range(2 * L)]
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_past = [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    names_out = ["logits"] + [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for n in names_past:
        axes[n] = {0: "batch", 2: "past"}
    for n in names_out[1:]:
        axes[n] = {0: "batch", 2: "total"}
    # transformers' own greedy output first: exporting a traced copy can leave a model changed (GPT-2's did)
    with torch.no_grad():
        refs = []
        prompts = PROMPTS if a.arch != "gpt2" else [[CHARS.index(c) for c in t] for t in ["First Citizen:\n", "ROMEO:", "a"]]
        for p in prompts:
            x = torch.tensor([p], dtype=torch.int64)
            g = m.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=a.new_tokens, do_sample=False,
                           eos_token_id=None, pad_token_id=0)
            refs.append({"prompt": p, "generated": g[0, len(p):].tolist()})
    with torch.no_grad():
        torch.onnx.export(WithCache(m, L), (ids, mask, pos, *past), os.path.join(a.out, "model.onnx"),
                          input_names=names_in + names_past, output_names=names_out, dynamic_axes=axes,
                          opset_version=17, dynamo=False)
        if a.no_positions:
            ax = {k: v for k, v in axes.items() if k != "position_ids"}
            torch.onnx.export(WithCacheNoPositions(m, L), (ids, mask, *past), os.path.join(a.out, "model_nopos.onnx"),
                              input_names=names_in[:2] + names_past, output_names=names_out, dynamic_axes=ax,
                              opset_version=17, dynamo=False)
        torch.onnx.export(NoCache(m), (ids, torch.ones(1, 2, dtype=torch.int64)),
                          os.path.join(a.out, "model_nocache.onnx"), input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                                        "logits": {0: "batch", 1: "seq"}})
    json.dump({"arch": a.arch, "vocab": vocab, "layers": L, "kv_heads": kvh, "head_dim": hd,
               "transformers": T.__version__, "torch": torch.__version__, "new_tokens": a.new_tokens,
               "greedy": refs}, open(os.path.join(a.out, "reference.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
