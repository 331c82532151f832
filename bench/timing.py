"""The timing loop the peer comparisons share: a peer's median latency, and tpu-sdk's from `tpu-sdk bench`.

Both sides run the same warm-up and iteration counts; medians are in milliseconds.
"""
import json
import subprocess
import sys
import time

import numpy as np


def median_ms(run, iterations, warmup):
    """Calls `run()` `warmup` times untimed, then `iterations` times; returns the median latency in ms."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def tpu_sdk_median_ms(a, input_args):
    """`tpu-sdk bench` of `a.model` on the CPU target with `a`'s threads, iterations and warm-up and the given
    `--input` arguments; returns its median latency in ms (exits with its error when it fails)."""
    cmd = [a.tpu_sdk, "--threads", str(a.threads), "bench", a.model, "--target", "cpu", "--iterations",
           str(a.iterations), "--warmup", str(a.warmup), "--json", *input_args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"tpu-sdk bench failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)["latency_ms"]["median"]


def report(a, peer, peer_ms, peer_note, ours):
    """Prints the comparison, then one JSON line with `{peer}_ms`, `tpu_sdk_ms` and `ratio`."""
    print(f"model:        {a.model}")
    print(f"threads:      {a.threads}, iterations {a.iterations}, warm-up {a.warmup}")
    print(f"{peer + ':':<13} {peer_ms:.3f} ms median ({peer_note})")
    print(f"tpu-sdk cpu:  {ours:.3f} ms median")
    print(f"ratio:        {ours / peer_ms:.2f}x {peer}'s latency")
    print(json.dumps({f"{peer.lower()}_ms": peer_ms, "tpu_sdk_ms": ours, "ratio": ours / peer_ms}))
