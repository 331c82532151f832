"""What the zoo's scripts share: where the cache is, how a model's folder looks, seeded samples.

A model lives in `.cache/zoo/models/<name>/`:
  model.onnx | model.tflite   the float model
  peer_int8.tflite            (Keras models) TensorFlow's converter's full-int8 model, same calibration samples
  peer_float.tflite           (MediaPipe models with a custom transposed convolution) the builtin twin LiteRT runs
                              as their float peer; (sparse models) the dense twin tf2onnx converts
                              (zoo/mediapipe_peer.py; coverage.py writes both)
  peer_float.onnx             (other TFLite models) tf2onnx's conversion, checked against LiteRT; coverage.py
                              builds it when first needed and quantizes it with onnxruntime as the int8 peer
  input_<i>.npy               one seeded random input per model input (batch 1), in the model's input order
  cal.npy                     calibration samples of input 0 (N on the first axis), when the model has one input
  meta.json                   name, source, family, format, input names/shapes, input value range
  .complete                   written last: the builder skips a model that has it
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("ZOO_CACHE", os.path.join(ROOT, ".cache", "zoo"))
MODELS = os.path.join(CACHE, "models")
N_CAL = int(os.environ.get("ZOO_N_CAL", "16"))


def model_dir(name):
    return os.path.join(MODELS, name)


def is_built(name):
    return os.path.isfile(os.path.join(model_dir(name), ".complete"))


def mark_built(name, meta):
    d = model_dir(name)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    open(os.path.join(d, ".complete"), "w").close()


def samples(shape, n, lo, hi, seed, dtype="float32"):
    """`n` seeded uniform samples of `shape` (batch axis included, taken as 1 per sample) in [lo, hi)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        return rng.integers(int(lo), int(hi), size=(n,) + tuple(shape[1:])).astype(dtype)
    return rng.uniform(lo, hi, size=(n,) + tuple(shape[1:])).astype(dtype)


def progress(i, total, name, what, t0):
    print(f"[{i}/{total}] {name}: {what} ({time.time() - t0:.1f} s)", flush=True)


def selected(names):
    """Names picked by ZOO_ONLY (comma separated), all when unset."""
    only = os.environ.get("ZOO_ONLY")
    if not only:
        return names
    want = set(only.split(","))
    return [n for n in names if n in want]


def fail(name, e):
    print(f"    {name}: FAILED to build: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr, flush=True)
