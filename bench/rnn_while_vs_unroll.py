#!/usr/bin/env python3
"""Which StableHLO form a recurrent layer should lower to: time steps unrolled, or a `while` loop over them.

usage: rnn_while_vs_unroll.py [--seq 100] [--batch 1] [--input 256] [--hidden 512] [--layers 2] [--runs 10]

Writes the same 2-layer bidirectional LSTM twice with JAX, once with `lax.scan` (a `stablehlo.while`) and once
with a Python loop (unrolled steps; targets/cloud-tpu/src/lower/recurrent.rs unrolls up to 8 steps and loops beyond; projection of the
whole sequence first in both), and times on XLA's CPU backend: the compile (lower + XLA compile) and the median
run. Runs with the Python of `.venv` (jax).
"""
import argparse
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()

    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_default_matmul_precision", "highest")
    rng = np.random.default_rng(0)
    H = a.hidden
    params = []
    size = a.input
    for _ in range(a.layers):
        s = 1 / np.sqrt(H)
        params.append([(rng.uniform(-s, s, (4 * H, size)).astype(np.float32), rng.uniform(-s, s, (4 * H, H)).astype(np.float32),
                        rng.uniform(-s, s, (4 * H,)).astype(np.float32)) for _ in range(2)])
        size = 2 * H
    x = rng.standard_normal((a.seq, a.batch, a.input)).astype(np.float32)

    def cell(r, carry, xp):
        h, c = carry
        g = xp + h @ r.T
        i, o, f, cc = jnp.split(g, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(cc)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    def direction(xs, w, r, b, reverse, unroll):
        proj = xs @ w.T + b
        z = jnp.zeros((a.batch, H), jnp.float32)
        if unroll:
            carry, ys = (z, z), [None] * a.seq
            for s in range(a.seq):
                t = a.seq - 1 - s if reverse else s
                carry, ys[t] = cell(r, carry, proj[t])
            return jnp.stack(ys)
        _, ys = lax.scan(lambda cr, p: cell(r, cr, p), (z, z), proj, reverse=reverse)
        return ys

    def model(x, unroll):
        for layer in params:
            f = direction(x, *layer[0], False, unroll)
            b = direction(x, *layer[1], True, unroll)
            x = jnp.concatenate([f, b], axis=-1)
        return x

    results = {}
    for unroll in (False, True):
        name = "unrolled" if unroll else "while (lax.scan)"
        t0 = time.perf_counter()
        lowered = jax.jit(lambda x, u=unroll: model(x, u)).lower(x)
        n_ops = lowered.as_text().count("\n")
        compiled = lowered.compile()
        compile_s = time.perf_counter() - t0
        compiled(x).block_until_ready()
        times = []
        for _ in range(a.runs):
            t1 = time.perf_counter()
            compiled(x).block_until_ready()
            times.append(time.perf_counter() - t1)
        results[name] = compiled(x)
        print(f"{name:<18} StableHLO {n_ops:>6} lines, compile {compile_s:6.2f} s, run {np.median(times) * 1e3:8.2f} ms median")
    a_, b_ = results.values()
    print(f"max |while - unrolled| = {float(jnp.max(jnp.abs(a_ - b_))):.2e}")


if __name__ == "__main__":
    main()
