"""Runs every zoo model through `target/release/tpu-sdk` and the peers, and writes zoo/COVERAGE.md.

Run by the oracle venv's Python (`.venv`: numpy, onnxruntime, LiteRT, the XLA CPU plugin, libtpu). One result file
per model in `.cache/zoo/results/` (reused while the binary and the model are older than it; `--force` redoes
them); the table is rewritten after every model, so a long run leaves a partial table behind, never a broken one.
A failing cell records its short error and the row goes on.

Cells (✅ pass, ❌ fail with the error, — not applicable):
  cpu          `tpu-sdk run` vs onnxruntime / LiteRT on the seeded inputs: max |err| ≤ 1e-4 + 1e-3·max|ref| (MediaPipe
               models with the custom Convolution2DTransposeBias: LiteRT runs the builtin twin, zoo/mediapipe_peer.py;
               with the attention face mesh's custom ops: MediaPipe's own runtime, zoo/mediapipe_graph_peer.py)
  cloud-tpu    `run --target cloud-tpu` on the XLA CPU PJRT plugin vs our CPU outputs, same tolerance
  aot          `compile --target cloud-tpu --topology v5e:2x2` with libtpu writes an executable
  float tflite `compile --target tflite` writes a float TFLite file; LiteRT (builtin kernels) runs it on the seeded
               inputs (transposed to the file's input layout) vs the peer, same tolerance as cpu
  int8 file    `compile --target edgetpu --calibration cal.npy` writes the int8 TFLite (single float input models)
  litert       LiteRT (builtin kernels) loads and runs that file
  bit-equal    our int8 CPU run of that file equals LiteRT's output (count of differing values)
  int8 err     relative L2 of the int8 outputs (dequantized) vs the float model on the calibration samples, ours
               next to the peer quantizer's (TF converter full-int8 for Keras models, onnxruntime quantize_static
               per-channel QDQ for ONNX models, and for TFLite models without a Keras source on tf2onnx's conversion
               of the float file, `peer_float.onnx`, through a dense twin for sparse models); passes at ≤ 1.25 × peer,
               or ≤ 0.05 where no peer runs
  tpu share    predicted Edge TPU op share from the compile report's mapping
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import common  # noqa: E402

BIN = os.environ.get("TPU_SDK_BIN", os.path.join(common.ROOT, "target", "release", "tpu-sdk"))
RESULTS = os.path.join(common.CACHE, "results")
TIMEOUT = int(os.environ.get("ZOO_TIMEOUT", "600"))
# libtpu's ahead-of-time compile takes minutes for mid-size models on a small shared machine
AOT_TIMEOUT = int(os.environ.get("ZOO_AOT_TIMEOUT", "240"))
COLUMNS = ["cpu", "cloud_tpu", "aot", "float_tflite", "int8_file", "litert", "bit_equal", "int8_err", "tpu_share"]
HEAD = ["CPU vs peer", "cloud-tpu (XLA CPU) vs CPU", "AOT v5e:2x2", "float TFLite: LiteRT vs peer", "int8 file",
        "LiteRT runs it", "ours = LiteRT", "int8 rel L2 ours / peer", "TPU op share"]
INT8_COLUMNS = COLUMNS[4:]


def xla_cpu_plugin():
    import fastatomstruct_xla_cpu as m
    return m.library_path()


def libtpu():
    import libtpu as m
    return os.path.join(os.path.dirname(m.__file__), "libtpu.so")


def short(text, n=160):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    err = [l for l in lines if l.lower().startswith("error")]
    s = (err[0] if err else (lines[-1] if lines else "no output"))
    s = s.replace("|", "/")
    return s if len(s) <= n else s[:n - 1] + "…"


class CellError(Exception):
    pass


def tpu_sdk(args, env=None, timeout=None):
    """Runs the CLI; a failure raises CellError with its error line, the zoo's paths left out."""
    e = dict(os.environ, **(env or {}))
    try:
        p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout or TIMEOUT, env=e)
    except subprocess.TimeoutExpired:
        raise CellError(f"timed out after {timeout or TIMEOUT} s")
    if p.returncode != 0:
        msg = short(p.stderr or p.stdout, 400)
        for a in args:
            if os.path.sep in a:
                msg = msg.replace(a + ": ", "").replace(a, os.path.basename(a))
        raise CellError(f"exit {p.returncode}: {short(msg)}")
    return p.stdout


# ---------------------------------------------------------------- peers
def peer_float(meta, path, feeds):
    """The float model's outputs by its peer runtime: onnxruntime for ONNX, LiteRT for TFLite, MediaPipe's runtime
    for TFLite models with MediaPipe's attention ops (zoo/mediapipe_graph_peer.py)."""
    import mediapipe_peer
    if meta["format"] == "tflite" and mediapipe_peer.needs_runtime(path):
        return mediapipe_runtime(path, [feeds])[0]
    if meta["format"] == "onnx":
        import onnxruntime as ort
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return s.run(None, {i.name: x for i, x in zip(s.get_inputs(), feeds)})
    return litert_run(litert_peer_path(path), feeds)


def peer_float_each(meta, path, samples):
    """`peer_float` of each sample (a batch-1 input of a single-input model), MediaPipe's runtime in one run."""
    import mediapipe_peer
    if meta["format"] == "tflite" and mediapipe_peer.needs_runtime(path):
        return mediapipe_runtime(path, [[x[None]] for x in samples])
    return [peer_float(meta, path, [x[None]]) for x in samples]


def mediapipe_runtime(path, feeds_each):
    """The outputs of MediaPipe's own runtime for each set of feeds (single-input models): zoo/mediapipe_graph_peer.py
    run by the Python with the mediapipe wheel (`.cache/zoo/venv-mp`, which zoo/build_wheels.py makes)."""
    import mediapipe_peer
    py = mediapipe_peer.runtime_python(common.CACHE)
    if not os.path.isfile(py):
        raise CellError(f"no peer: MediaPipe's custom ops need MediaPipe's runtime ({py} is missing; "
                        "ZOO_ONLY=mp_face_landmark_with_attention python3 zoo/build.py makes it)")
    if any(len(f) != 1 for f in feeds_each):
        raise CellError("no peer: MediaPipe's runtime peer takes single-input models")
    shapes = mediapipe_peer.output_shapes(path)
    with tempfile.TemporaryDirectory(prefix="zoo-mp-") as t:
        x = os.path.join(t, "x.npy")
        np.save(x, np.concatenate([np.asarray(f[0], np.float32) for f in feeds_each]))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mediapipe_graph_peer.py")
        r = subprocess.run([py, script, path, x, t, str(len(shapes))], capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode != 0:
            raise CellError("MediaPipe's runtime failed: " + short(r.stderr or r.stdout, 80))
        outs = [np.load(os.path.join(t, f"output_{k}.npy")) for k in range(len(shapes))]
    return [[o[i].reshape(s) for o, s in zip(outs, shapes)] for i in range(len(feeds_each))]


def litert_peer_path(path):
    """The TFLite file LiteRT runs as the peer of `path`: itself, or for MediaPipe models with its custom
    `Convolution2DTransposeBias` the builtin TRANSPOSE_CONV twin (zoo/mediapipe_peer.py), cached beside it."""
    import mediapipe_peer
    if not mediapipe_peer.has_custom_ops(path):
        return path
    twin = os.path.join(os.path.dirname(path), "peer_float.tflite")
    if not os.path.isfile(twin) or os.path.getmtime(twin) < os.path.getmtime(path):
        try:
            data = mediapipe_peer.builtin_twin(path)
        except ValueError as e:
            raise CellError(f"no peer: {e}")
        with open(twin + ".tmp", "wb") as f:
            f.write(data)
        os.replace(twin + ".tmp", twin)
    return twin


def interpreter(path):
    """LiteRT's builtin kernels without the XNNPACK delegate (what the int8 CPU runtime matches bit for bit)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    return Interpreter(path, num_threads=1,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


def litert_run(path, feeds):
    it = interpreter(path)
    ins = it.get_input_details()
    for d, x in zip(ins, feeds):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x.astype(d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def quantize(x, scale, zp, dtype=np.int8):
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale) + zp, info.min, info.max).astype(dtype)


def litert_int8(path, samples, perm=None):
    """Runs an int8-in/int8-out TFLite on float samples (quantized with the file's input parameters); returns the
    dequantized outputs, one list per sample."""
    it = interpreter(path)
    it.allocate_tensors()
    di, dos = it.get_input_details()[0], it.get_output_details()
    out = []
    for x in samples:
        x = x[None]
        if perm is not None:
            x = np.transpose(x, perm)
        s, z = di["quantization"]
        it.set_tensor(di["index"], quantize(x, s, z, di["dtype"]) if s else x.astype(di["dtype"]))
        it.invoke()
        row = []
        for d in dos:
            y = it.get_tensor(d["index"]).astype(np.float32)
            s, z = d["quantization"]
            row.append((y - z) * s if s else y)
        out.append(row)
    return out


def ort_qdq(path, cal, name, workdir):
    """onnxruntime's post-training static quantization (per-channel weights, QDQ, int8) on the same samples."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: x[None]} for x in cal])

        def get_next(self):
            return next(self.it, None)

    import onnx
    m = onnx.load(path)
    if max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 13:
        # per-channel DequantizeLinear needs opset 13; onnxruntime's quantizer does not upgrade by itself
        m = onnx.version_converter.convert_version(m, 13)
        path = os.path.join(workdir, "opset13.onnx")
        onnx.save(m, path)
    pre = os.path.join(workdir, "pre.onnx")
    try:
        quant_pre_process(path, pre, skip_symbolic_shape=True)
    except Exception:
        pre = path
    q = os.path.join(workdir, "ort_qdq.onnx")
    quantize_static(pre, q, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return q


def tflite_peer_onnx(d, path, cal):
    """The float TFLite model converted to ONNX by tf2onnx (`--tflite`, in the TensorFlow venv), for onnxruntime's
    quantizer to be the peer of models with no Keras source (MediaPipe). Built once into `<model>/peer_float.onnx`,
    and only kept when onnxruntime runs it like LiteRT runs the TFLite file on the calibration samples, so the peer
    quantizes the same function."""
    onnx_path = os.path.join(d, "peer_float.onnx")
    if os.path.isfile(onnx_path) and os.path.getmtime(onnx_path) >= os.path.getmtime(path):
        return onnx_path
    tf_py = os.environ.get("TPU_SDK_TF_PYTHON") or os.path.join(common.ROOT, ".venv-tf", "bin", "python")
    if not os.path.isfile(tf_py):
        raise CellError("no TensorFlow venv for tf2onnx (.venv-tf or TPU_SDK_TF_PYTHON)")
    tmp = onnx_path + ".tmp"
    # a model with MediaPipe's custom transposed convolution converts through its builtin twin (same arithmetic),
    # a sparse model through its dense twin (the weights LiteRT densifies, checked to compute the same outputs)
    twin = os.path.join(d, "peer_float.tflite")
    import mediapipe_peer
    if not os.path.isfile(twin) and mediapipe_peer.has_densify(path):
        dense = mediapipe_peer.dense_twin(path)
        with open(twin + ".tmp", "wb") as f:
            f.write(dense)
        e = rel_l2([litert_run(twin + ".tmp", [x[None]]) for x in cal], [litert_run(path, [x[None]]) for x in cal])
        if e > 1e-6:
            os.remove(twin + ".tmp")
            raise CellError(f"the dense twin differs from the sparse model (rel L2 {e:.1e})")
        os.replace(twin + ".tmp", twin)
    path = twin if os.path.isfile(twin) else path
    import onnxruntime as ort
    # opset 13 first (what the cached peers use); ops such as HardSwish exist only from opset 14, so a model
    # onnxruntime cannot load at 13 is converted again at 17
    for opset in ("13", "17"):
        r = subprocess.run([tf_py, "-m", "tf2onnx.convert", "--tflite", path, "--output", tmp, "--opset", opset],
                           capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode != 0 or not os.path.isfile(tmp):
            raise CellError("tf2onnx: " + short((r.stderr or r.stdout).strip().splitlines()[-1] if (r.stderr or r.stdout)
                                                else f"exit {r.returncode}", 80))
        try:
            s = ort.InferenceSession(tmp, providers=["CPUExecutionProvider"])
            break
        except Exception as e:
            os.remove(tmp)
            if opset == "17":
                raise CellError(f"onnxruntime cannot load tf2onnx's model: {short(str(e), 80)}")
    n = s.get_inputs()[0].name
    # float rounding differs between the runtimes (deep models reach ~1e-3 of max|ref| in the worst value), so
    # the check is the relative L2 of the worst output: 1e-3, two orders below any int8 error here
    d_l2 = rel_l2([s.run(None, {n: x[None]}) for x in cal], [litert_run(path, [x[None]]) for x in cal])
    if d_l2 > 1e-3:
        os.remove(tmp)
        raise CellError(f"tf2onnx's ONNX model differs from the TFLite model (rel L2 {d_l2:.1e})")
    os.replace(tmp, onnx_path)
    return onnx_path


def rel_l2(got, ref):
    """Worst output's ‖got − ref‖ / ‖ref‖ over all samples."""
    worst = 0.0
    for k in range(len(ref[0])):
        g = np.concatenate([np.asarray(r[k], np.float64).ravel() for r in got])
        f = np.concatenate([np.asarray(r[k], np.float64).ravel() for r in ref])
        if g.shape != f.shape:
            raise CellError(f"output {k}: {g.size} values vs the float model's {f.size}")
        worst = max(worst, float(np.linalg.norm(g - f) / max(np.linalg.norm(f), 1e-30)))
    return worst


def compare(ours, ref, what):
    if len(ours) != len(ref):
        raise CellError(f"{len(ours)} outputs vs {what}'s {len(ref)}")
    abs_err, rel_err = 0.0, 0.0
    ok = True
    for k, (a, b) in enumerate(zip(ours, ref)):
        a, b = np.asarray(a), np.asarray(b)
        if a.size != b.size:
            raise CellError(f"output {k}: shape {list(a.shape)} vs {what}'s {list(b.shape)}")
        a = a.reshape(b.shape).astype(np.float64)
        b = b.astype(np.float64)
        if not np.all(np.isfinite(a) == np.isfinite(b)):
            raise CellError(f"output {k}: non-finite values differ from {what}'s")
        fin = np.isfinite(b)
        e = float(np.max(np.abs(a[fin] - b[fin]), initial=0.0))
        m = float(np.max(np.abs(b[fin]), initial=0.0))
        abs_err, rel_err = max(abs_err, e), max(rel_err, e / max(m, 1e-30))
        ok &= e <= 1e-4 + 1e-3 * m
    return ok, f"{abs_err:.1e} abs, {rel_err:.1e} rel"


def read_outputs(d):
    files = sorted((f for f in os.listdir(d) if f.startswith("output_")), key=lambda f: int(f[7:-4]))
    return [np.load(os.path.join(d, f)) for f in files]


# ---------------------------------------------------------------- one model
def aot_compile(path, sargs, work):
    out = os.path.join(work, "v5e.pjrt")
    env = {"TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": "v5litepod-4", "TPU_WORKER_ID": "0",
           "TPU_WORKER_HOSTNAMES": "localhost"}
    args = ["compile", path, "--target", "cloud-tpu", "--topology", "v5e:2x2", "-o", out, "--plugin",
            libtpu()] + sargs
    import fcntl
    # libtpu allows one process per machine (its lockfile in /tmp): one AOT compile at a time from here, and
    # a few retries when another program holds it
    with open(os.path.join(tempfile.gettempdir(), "tpu-sdk-zoo-libtpu.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for attempt in range(20):
            try:
                tpu_sdk(args, env, AOT_TIMEOUT)
                break
            except CellError as e:
                if "lockfile" not in str(e) or attempt == 19:
                    raise
                time.sleep(15)
    if not os.path.isfile(out) or os.path.getsize(out) == 0:
        raise CellError("exit 0 but no executable written")
    return True, f"{os.path.getsize(out) / 1e6:.1f} MB"


def timed_cell(fn):
    t = time.time()
    try:
        ok, text = fn()
        c = {"ok": ok, "text": text}
    except CellError as e:
        c = {"ok": False, "text": str(e)}
    except Exception as e:
        c = {"ok": False, "text": f"{type(e).__name__}: {short(str(e))}"}
    c["s"] = round(time.time() - t, 1)
    return c


AOT_PENDING = "not run yet (AOT pass pending)"


def shape_args(meta, path):
    """`--input-shape` for ONNX inputs whose dims the model leaves free (the zoo's chosen sizes)."""
    if meta["format"] != "onnx":
        return []
    import onnx
    m = onnx.load(path, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in init]
    args = []
    for i, spec in zip(ins, meta["inputs"]):
        dims = i.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims) and spec["shape"]:
            args += ["--input-shape", f"{i.name}=" + ",".join(str(v) for v in spec["shape"])]
    return args


def bind_args(meta):
    """`--bind` for the inputs the zoo gives a fixed value (silero-vad's `sr`): a TPU program is compiled for
    that value, so an `If` it decides folds (`run` binds such inputs from the files it is given)."""
    if meta["format"] != "onnx":
        return []
    return sum((["--bind", f"{i['name']}={i['value']}"] for i in meta["inputs"] if "value" in i), [])


EARLIER = " (earlier binary)"


def earlier_aot(name):
    """With ZOO_SKIP_AOT=1 ZOO_KEEP_AOT=1: the AOT cell of this model's previous result, marked as coming from the
    binary that wrote it (the AOT compile depends only on the StableHLO lowering; a full run redoes it)."""
    f = os.path.join(RESULTS, name + ".json")
    try:
        v = json.load(open(f))["cells"]["aot"]
    except (OSError, ValueError, KeyError):
        return None
    if v.get("ok") is None or v.get("text") == AOT_PENDING:
        return None
    return {**v, "text": v["text"] if v["text"].endswith(EARLIER) else v["text"] + EARLIER}


def run_model(name, work):
    d = common.model_dir(name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    path = os.path.join(d, "model." + meta["format"])
    ninp = len(meta["inputs"])
    in_files = [os.path.join(d, f"input_{i}.npy") for i in range(ninp)]
    feeds = [np.load(f) for f in in_files]
    sargs = shape_args(meta, path)
    inputs = sum((["--input", f] for f in in_files), [])
    row, cpu_out = {}, None

    def cell(col, fn):
        row[col] = timed_cell(fn)

    def cpu():
        nonlocal cpu_out
        out = os.path.join(work, "cpu")
        tpu_sdk(["run", path, "--output-dir", out, "--json"] + inputs + sargs)
        cpu_out = read_outputs(out)
        return compare(cpu_out, peer_float(meta, path, feeds), "onnxruntime" if meta["format"] == "onnx" else "LiteRT")

    def cloud():
        out = os.path.join(work, "xla")
        tpu_sdk(["run", path, "--target", "cloud-tpu", "--plugin", xla_cpu_plugin(), "--output-dir", out, "--json"]
                + inputs + sargs)
        if cpu_out is None:
            raise CellError("no CPU outputs to compare with")
        return compare(read_outputs(out), cpu_out, "CPU")

    cell("cpu", cpu)
    cell("cloud_tpu", cloud)
    if os.environ.get("ZOO_SKIP_AOT"):
        row["aot"] = earlier_aot(name) if os.environ.get("ZOO_KEEP_AOT") else None
        row["aot"] = row["aot"] or {"ok": None, "text": AOT_PENDING}
    else:
        cell("aot", lambda: aot_compile(path, sargs + bind_args(meta), work))

    def float_tflite():
        f = os.path.join(work, "m_float.tflite")
        binds = bind_args(meta)
        rep = json.loads(tpu_sdk(["compile", path, "--target", "tflite", "-o", f, "--json"] + sargs + binds))
        if not os.path.isfile(f):
            raise CellError("exit 0 but no file written")
        # the inputs bound to their values are no longer inputs of the file
        fed = [x for x, spec in zip(feeds, meta["inputs"]) if not (binds and "value" in spec)]
        perms = [i.get("layout_perm") for i in rep["inputs"]]
        xs = [np.transpose(x, p) if p and x.ndim == len(p) else x for x, p in zip(fed, perms)]
        try:
            got = litert_run(f, xs)
        except Exception as e:
            raise CellError(f"LiteRT cannot run it: {short(str(e))}")
        ok, text = compare(got, peer_float(meta, path, feeds), "onnxruntime" if meta["format"] == "onnx" else "LiteRT")
        return ok, text

    cell("float_tflite", float_tflite)

    cal_path = os.path.join(d, "cal.npy")
    if ninp != 1 or not os.path.isfile(cal_path):
        why = "multi-input model" if ninp != 1 else "integer input: token ids"
        for c in INT8_COLUMNS:
            row[c] = {"ok": None, "text": f"— ({why})"}
        return row

    q = os.path.join(work, "m_int8.tflite")
    report = {}

    def int8_file():
        rep = tpu_sdk(["compile", path, "--target", "edgetpu", "--calibration", cal_path, "-o", q, "--json"] + sargs)
        report.update(json.loads(rep))
        if not os.path.isfile(q):
            raise CellError("exit 0 but no file written")
        return True, f"{os.path.getsize(q) / 1e6:.1f} MB"

    cell("int8_file", int8_file)
    if not row["int8_file"]["ok"]:
        for c in INT8_COLUMNS[1:]:
            row[c] = {"ok": None, "text": "— (no int8 file)"}
        return row
    perm = report["inputs"][0].get("layout_perm")
    cal = np.load(cal_path)
    lit = {}

    def litert():
        lit["out"] = litert_int8(q, cal, perm)
        return True, "yes"

    def bit_equal():
        it = interpreter(q)
        it.allocate_tensors()
        di = it.get_input_details()[0]
        x = feeds[0] if perm is None else np.transpose(feeds[0], perm)
        s, z = di["quantization"]
        xq = quantize(x, s, z, di["dtype"])
        xf = os.path.join(work, "xq.npy")
        np.save(xf, xq)
        it.set_tensor(di["index"], xq)
        it.invoke()
        ref = [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]
        out = os.path.join(work, "int8")
        tpu_sdk(["run", q, "--input", xf, "--output-dir", out, "--json"])
        ours = read_outputs(out)
        if len(ours) != len(ref):
            raise CellError(f"{len(ours)} outputs vs LiteRT's {len(ref)}")
        diff = sum(int(np.sum(a.reshape(b.shape) != b)) for a, b in zip(ours, ref))
        total = sum(b.size for b in ref)
        worst = max(int(np.max(np.abs(a.reshape(b.shape).astype(int) - b.astype(int)), initial=0))
                    for a, b in zip(ours, ref))
        return diff == 0, ("bit-equal" if diff == 0 else f"{diff}/{total} differ (max {worst} LSB)")

    def int8_err():
        if "out" not in lit:
            raise CellError("LiteRT did not run the int8 file")
        ref = peer_float_each(meta, path, cal)
        # our int8 outputs may be NHWC where the ONNX model's are NCHW: the report names each output's permutation
        outs = report.get("outputs", [])
        ours = []
        for r in lit["out"]:
            row_ = []
            for k, y in enumerate(r):
                p = outs[k].get("layout_perm") if k < len(outs) else None
                row_.append(np.transpose(y, np.argsort(p)) if p and y.ndim == len(p) else y)
            ours.append(row_)
        e = rel_l2(ours, ref)
        peer, peer_text = None, "no peer"
        try:
            # TFLite models without TF's int8 model (MediaPipe): onnxruntime's quantizer on tf2onnx's conversion
            peer_src = path if meta["format"] == "onnx" else None
            import mediapipe_peer
            if meta["format"] == "tflite" and mediapipe_peer.needs_runtime(path):
                raise CellError("tf2onnx cannot convert MediaPipe's custom ops")
            if peer_src is None and not os.path.isfile(os.path.join(d, "peer_int8.tflite")):
                peer_src = tflite_peer_onnx(d, path, cal)
            if peer_src is not None:
                with tempfile.TemporaryDirectory() as t:
                    qq = ort_qdq(peer_src, cal, _onnx_input_name(peer_src), t)
                    import onnxruntime as ort
                    s = ort.InferenceSession(qq, providers=["CPUExecutionProvider"])
                    n = s.get_inputs()[0].name
                    peer = rel_l2([s.run(None, {n: x[None]}) for x in cal], ref)
            elif os.path.isfile(os.path.join(d, "peer_int8.tflite")):
                peer = rel_l2(litert_int8(os.path.join(d, "peer_int8.tflite"), cal), ref)
            elif meta.get("peer_int8_error"):
                peer_text = "TF int8 failed"
        except Exception as ex:
            peer_text = f"peer failed: {short(str(ex), 60)}"
        if peer is not None:
            peer_text = f"{peer:.3f}"
        ok = e <= 1.25 * peer + 1e-6 if peer is not None else e <= 0.05
        return ok, f"{e:.3f} / {peer_text}"

    def tpu_share():
        return tpu_share_of(report)

    cell("litert", litert)
    cell("bit_equal", bit_equal)
    cell("int8_err", int8_err)
    cell("tpu_share", tpu_share)
    return row


def tpu_share_of(report):
    """The predicted Edge TPU share of a compile report, naming the first op that goes to the CPU and why (the
    Edge TPU compiler runs everything after it on the CPU too)."""
    m = report.get("mapping") or {}
    t, c = m.get("tpu_ops", 0), m.get("cpu_ops", 0)
    if t + c == 0:
        raise CellError("no mapping in the compile report")
    first = next((o for o in m.get("ops", []) if o.get("placement") != "tpu"), None)
    why = f"; first CPU op: {first['op']} ({first.get('reason') or first.get('status')})" if first else ""
    return t == t + c, f"{100 * t / (t + c):.0f}% ({t}/{t + c})" + why


def _onnx_input_name(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in init][0]


# ---------------------------------------------------------------- table
def render(names, out):
    rows = []
    for n in names:
        f = os.path.join(RESULTS, n + ".json")
        if os.path.isfile(f):
            rows.append(json.load(open(f)))
    lines = ["# Model zoo coverage", "",
             f"Written by `zoo/coverage.py` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); "
             "regenerate with `bash zoo/run.sh`. ✅ passes, ❌ fails (with the error), — does not apply. "
             "The columns are described at the top of `zoo/coverage.py`; models and their sources in "
             "`zoo/README.md`.", ""]
    lines += ["## Summary", "", f"{len(rows)} models.", "", "| column | pass | fail | n/a | not run yet |",
              "|---|---|---|---|---|"]
    for c, h in zip(COLUMNS, HEAD):
        cells = [r["cells"].get(c, {}) for r in rows]
        pending = sum(v.get("text") == AOT_PENDING or not v for v in cells)  # a column added after the run: {}
        vals = [v.get("ok") for v in cells]
        lines.append(f"| {h} | {sum(v is True for v in vals)} | {sum(v is False for v in vals)} "
                     f"| {sum(v is None for v in vals) - pending} | {pending} |")
    if any(r["cells"].get("aot", {}).get("text") == AOT_PENDING for r in rows):
        lines += ["", "AOT compiles ran in their own time-boxed pass (`ZOO_SKIP_AOT=1`, then `--aot-only`, smallest "
                  "models first; libtpu allows one compile per machine at a time); \"not run yet\" cells are the "
                  "models that pass did not reach."]
    kept = sum(r["cells"].get("aot", {}).get("text", "").endswith(EARLIER) for r in rows)
    if kept:
        lines += ["", f"{kept} AOT cells marked \"(earlier binary)\" come from the previous run's binary "
                  "(`ZOO_SKIP_AOT=1 ZOO_KEEP_AOT=1`: every other column was re-run; the AOT compile depends only on the "
                  "StableHLO lowering). `bash zoo/run.sh` redoes them."]
    lines += ["", "## Models", "", "| model | source | " + " | ".join(HEAD) + " |",
              "|---|---|" + "---|" * len(HEAD)]
    for r in rows:
        cells, seen = [], {}
        for c, h in zip(COLUMNS, HEAD):
            v = r["cells"].get(c, {"ok": None, "text": "not run yet"})
            mark = {True: "✅", False: "❌", None: ""}[v["ok"]]
            t = v["text"].replace("error: ", "").replace("cannot load unsupported: ", "unsupported: ")
            if v["ok"] is False and t in seen:
                t = f"same as {seen[t]}"
            elif v["ok"] is False:
                seen[t] = h
            cells.append(f"{mark} {t if len(t) <= 120 else t[:119] + '…'}".strip())
        lines.append(f"| {r['name']} | {r['source']} | " + " | ".join(cells) + " |")
    lines += ["", "## Most common failures per column", "",
              "Error texts with numbers, node and tensor names blanked, most frequent first.", ""]
    for c, h in zip(COLUMNS, HEAD):
        counts = {}
        for r in rows:
            v = r["cells"].get(c, {})
            if v.get("ok") is False:
                k = _pattern(v["text"], c)
                counts[k] = counts.get(k, 0) + 1
        if counts:
            lines.append(f"- **{h}**: " + "; ".join(f"{n}× `{k}`" for k, n in
                                                       sorted(counts.items(), key=lambda kv: -kv[1])[:6]))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def _pattern(text, col=None):
    import re
    if col == "int8_err":
        return "no peer, above 0.05" if "no peer" in text or "failed" in text else "above 1.25 × the peer's"
    if col == "tpu_share" and "first CPU op: " in text:
        return "first CPU op: " + re.sub(r"\d+", "N", text.split("first CPU op: ", 1)[1])
    t = text.replace("error: ", "").replace("cannot load unsupported: ", "unsupported: ")
    t = re.sub(r"'[^']*('|$)|\"[^\"]*(\"|$)|`[^`]*(`|$)", "…", t)
    t = re.sub(r"\bnode [^ ]+ \(", "node … (", t)
    t = re.sub(r"(?<![A-Za-z_])\d+(\.\d+)?(e-?\d+)?(?![A-Za-z_])", "N", t)
    return t.replace("`", "")[:140]


def save(path, obj):
    """Writes a result atomically: another coverage process (the AOT pass) may read it meanwhile."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)


def check(names, expect):
    """Cells listed in `expect` ("model column" per line) that do not pass now: the fast subset's regression gate."""
    bad, n = [], 0
    for line in open(expect):
        line = line.split("#")[0].strip()
        if not line:
            continue
        model, col = line.split()
        if model not in names:
            continue
        n += 1
        f = os.path.join(RESULTS, model + ".json")
        cell = json.load(open(f))["cells"].get(col, {}) if os.path.isfile(f) else {"text": "no result"}
        if cell.get("ok") is not True:
            bad.append(f"{model} {col}: {cell.get('text')}")
    for b in bad:
        print(f"REGRESSION {b}")
    print(f"zoo: {n - len(bad)} passed, {len(bad)} failed")
    return not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--force", action="store_true", help="recompute results even when cached")
    ap.add_argument("--out", default=os.path.join(common.ROOT, "zoo", "COVERAGE.md"))
    ap.add_argument("--expect", help="file of `model column` cells that must pass (exit 1 otherwise)")
    ap.add_argument("--aot-only", action="store_true",
                    help="fill in the AOT cells left pending by a ZOO_SKIP_AOT=1 run")
    a = ap.parse_args()
    if not os.path.isfile(BIN):
        sys.exit(f"error: {BIN} is missing; build it with `cargo build --release -p tpu-sdk`")
    os.makedirs(RESULTS, exist_ok=True)
    every = sorted(n for n in os.listdir(common.MODELS) if common.is_built(n))
    names = [n for n in a.only.split(",") if n in every] if a.only else every  # --only keeps its order
    table = names if a.expect else every
    t0 = time.time()
    bin_mtime = os.path.getmtime(BIN)
    if a.aot_only:
        # smallest models first: libtpu's compile time grows with the model, so a time-boxed pass fills most cells
        size = lambda n: sum(os.path.getsize(os.path.join(common.model_dir(n), f))  # noqa: E731
                             for f in os.listdir(common.model_dir(n)) if f.startswith("model."))
        for i, name in enumerate(sorted(names, key=size), 1):
            res = os.path.join(RESULTS, name + ".json")
            if not os.path.isfile(res) or json.load(open(res))["cells"].get("aot", {}).get("text") != AOT_PENDING:
                continue
            d = common.model_dir(name)
            meta = json.load(open(os.path.join(d, "meta.json")))
            path = os.path.join(d, "model." + meta["format"])
            with tempfile.TemporaryDirectory(prefix="zoo-") as work:
                c = timed_cell(lambda: aot_compile(path, shape_args(meta, path) + bind_args(meta), work))
            r = json.load(open(res))
            r["cells"]["aot"] = c
            save(res, r)
            common.progress(i, len(names), name, f"aot={'ok' if c['ok'] else 'FAIL'}", t0)
        render(table, a.out)
        return
    for i, name in enumerate(names, 1):
        res = os.path.join(RESULTS, name + ".json")
        mdir = common.model_dir(name)
        if (not a.force and os.path.isfile(res) and os.path.getmtime(res) > bin_mtime
                and os.path.getmtime(res) > os.path.getmtime(os.path.join(mdir, ".complete"))
                and (os.environ.get("ZOO_SKIP_AOT") or json.load(open(res))["cells"]["aot"]["text"] != AOT_PENDING)):
            common.progress(i, len(names), name, "cached result", t0)
            continue
        meta = json.load(open(os.path.join(mdir, "meta.json")))
        with tempfile.TemporaryDirectory(prefix="zoo-") as work:
            cells = run_model(name, work)
        src = {"keras": "Keras (random)", "torch": "torch (random)", "wheel": "wheel (pretrained)",
               "mediapipe": "MediaPipe wheel (pretrained)"}[meta["family"]]
        save(res, {"name": name, "source": src, "cells": cells})
        summary = " ".join(f"{c}={'ok' if v['ok'] else ('-' if v['ok'] is None else 'FAIL')}"
                           for c, v in cells.items())
        common.progress(i, len(names), name, summary, t0)
        render(table, a.out)
    render(table, a.out)
    if a.expect and not check(names, a.expect):
        sys.exit(1)


if __name__ == "__main__":
    main()
