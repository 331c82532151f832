"""tpu_sdk.Session against the peers: onnxruntime on ONNX models, LiteRT (builtin kernels) on TFLite models."""

import threading

import numpy as np
import onnxruntime as ort
import pytest

import tpu_sdk
from conftest import DATA, EDGETPU_DATA, ROOT, ZOO, litert, need, random_input

CLS = ROOT / "examples" / "models" / "text_direction_cls.onnx"


def ort_run(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def litert_run(path, feeds):
    it = litert(path)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def assert_close(ours, theirs, rtol=1e-4, atol=1e-5):
    assert list(ours) == list(theirs)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype, k
        assert ours[k].shape == theirs[k].shape, k
        np.testing.assert_allclose(ours[k], theirs[k], rtol=rtol, atol=atol, err_msg=k)


def test_readme_example_matches_onnxruntime():
    # the README's example: free dims (N, H, W) take the shapes of the arrays given
    s = tpu_sdk.Session(CLS)
    assert [(i.name, i.dtype, i.shape) for i in s.inputs] == [("x", np.dtype("float32"), (None, 3, None, None))]
    x = np.random.default_rng(1).random((1, 3, 48, 192), dtype=np.float32)
    assert_close(s.run({"x": x}), ort_run(CLS, {"x": x}))


def test_new_shapes_of_free_dims_are_prepared_again():
    s = tpu_sdk.Session(CLS, threads=1)
    for shape in [(1, 3, 48, 192), (2, 3, 48, 96), (1, 3, 48, 192)]:
        x = random_input(np.float32, shape, seed=sum(shape))
        assert_close(s.run({"x": x}), ort_run(CLS, {"x": x}))


def test_input_shapes_fix_free_dims():
    s = tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})
    assert s.inputs[0].shape == (1, 3, 48, 192)
    assert s.outputs[0].shape == (1, 2)
    with pytest.raises(tpu_sdk.InputError):
        s.run({"x": np.zeros((1, 3, 32, 96), np.float32)})


def test_non_contiguous_and_list_feeds():
    s = tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})
    base = random_input(np.float32, (1, 3, 192, 48), seed=3)
    x = base.transpose(0, 1, 3, 2)  # a strided view
    assert not x.flags.c_contiguous
    assert_close(s.run({"x": x}), ort_run(CLS, {"x": np.ascontiguousarray(x)}))
    assert_close(s.run({"x": x.tolist()}), ort_run(CLS, {"x": np.ascontiguousarray(x)}))


def test_llm_fixture_matches_onnxruntime():
    path = ROOT / "cli" / "tests" / "data" / "llm" / "llama" / "model_nocache.onnx"
    s = tpu_sdk.Session(path)
    feeds = {}
    for i in s.inputs:
        shape = [1 if d is None else d for d in i.shape]
        if i.name == "input_ids" or i.name.endswith("ids"):
            shape = [1, 7] if len(shape) == 2 else shape
            feeds[i.name] = np.random.default_rng(5).integers(0, 64, size=shape).astype(i.dtype)
        else:
            feeds[i.name] = np.ones([1, 7] if len(shape) == 2 else shape, dtype=i.dtype)
    assert_close(s.run(feeds), ort_run(path, feeds), rtol=1e-3, atol=1e-4)


def test_zoo_onnx_model_matches_onnxruntime():
    path = need(ZOO / "ocr_ppocr_mobile_cls" / "model.onnx")
    x = np.load(need(ZOO / "ocr_ppocr_mobile_cls" / "input_0.npy"))
    s = tpu_sdk.Session(path)
    assert_close(s.run({s.inputs[0].name: x}), ort_run(path, {s.inputs[0].name: x}), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["convnet_f32.tflite", "opsnet_f32.tflite"])
def test_float_tflite_matches_litert(name):
    path = EDGETPU_DATA / name
    s = tpu_sdk.Session(path)
    feeds = {i.name: random_input(i.dtype, i.shape, seed=k) for k, i in enumerate(s.inputs)}
    assert_close(s.run(feeds), litert_run(path, feeds))


def test_zoo_tflite_model_matches_litert():
    path = need(ZOO / "keras_mobilenet_v2_035_96" / "model.tflite")
    s = tpu_sdk.Session(path)
    x = np.load(need(ZOO / "keras_mobilenet_v2_035_96" / "input_0.npy"))
    assert_close(s.run({s.inputs[0].name: x}), litert_run(path, {s.inputs[0].name: x}), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("path", [EDGETPU_DATA / "convnet_int8.tflite", DATA / "classifier_uint8.tflite"])
def test_int8_tflite_is_bit_equal_to_litert(path):
    s = tpu_sdk.Session(path)
    feeds = {i.name: random_input(i.dtype, [d or 1 for d in i.shape], seed=k + 11) for k, i in enumerate(s.inputs)}
    ours, theirs = s.run(feeds), litert_run(path, feeds)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype
        np.testing.assert_array_equal(ours[k], theirs[k])
    q = s.inputs[0].quantization
    d = litert(path).get_input_details()[0]
    assert q is not None and np.float32(q[0][0]) == np.float32(d["quantization"][0]) and q[1][0] == d["quantization"][1]


def test_outputs_own_their_memory_and_runs_are_independent():
    s = tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})
    x = random_input(np.float32, (1, 3, 48, 192), seed=9)
    a = s.run({"x": x})
    b = s.run({"x": x + 1})
    assert not np.shares_memory(a[s.outputs[0].name], b[s.outputs[0].name])
    assert_close(a, ort_run(CLS, {"x": x}))


def test_input_array_is_read_in_place():
    # an array from input_array is the runtime's own tensor: runs read it with nothing copied in
    s = tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})
    a = s.input_array("x")
    assert a.shape == (1, 3, 48, 192) and a.dtype == np.float32 and a.flags.writeable and not a.any()
    copied = tpu_sdk._native._input_bytes_copied
    for seed in (11, 12):
        x = random_input(np.float32, a.shape, seed=seed)
        a[...] = x
        before = copied()
        ours = s.run({"x": a})
        assert copied() == before, "an input_array array was copied"
        assert_close(ours, ort_run(CLS, {"x": x}))
    # any other array is copied once, and counted
    before = copied()
    assert_close(s.run({"x": x.copy()}), ours, rtol=0, atol=0)
    assert copied() == before + x.nbytes
    # a view of the whole array in C order is the same memory: read in place too
    before = copied()
    assert_close(s.run({"x": a.reshape(1, 3, 48, 192)}), ours, rtol=0, atol=0)
    assert copied() == before
    # a strided view is not the tensor's layout: copied, and still right
    t = s.input_array("x", [1, 3, 48, 192])
    t[...] = x
    assert_close(s.run({"x": t[:, ::-1][:, ::-1]}), ours, rtol=0, atol=0)
    # the array keeps its memory after the session is gone
    del s
    import gc

    gc.collect()
    a[...] = 2.0
    assert float(a.sum()) == 2.0 * a.size


def test_input_array_shapes_and_names():
    s = tpu_sdk.Session(CLS)  # free N, H, W
    with pytest.raises(tpu_sdk.InputError, match="give the shape"):
        s.input_array("x")
    with pytest.raises(tpu_sdk.InputError, match="does not fit"):
        s.input_array("x", [1, 4, 48, 192])
    with pytest.raises(tpu_sdk.InputError, match="no input 'y'"):
        s.input_array("y", [1, 3, 48, 192])
    with pytest.raises(tpu_sdk.Error, match="memory"):
        s.input_array("x", [1 << 20, 3, 1 << 20, 1 << 10])
    a = s.input_array("x", [2, 3, 48, 96])
    a[...] = random_input(np.float32, a.shape, seed=5)
    before = tpu_sdk._native._input_bytes_copied()
    assert_close(s.run({"x": a}), ort_run(CLS, {"x": np.array(a)}))
    assert tpu_sdk._native._input_bytes_copied() == before


def test_threads_share_a_session():
    # the GIL is released while a model runs: four Python threads run one session at once
    s = tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})
    xs = [random_input(np.float32, (1, 3, 48, 192), seed=20 + k) for k in range(4)]
    got = [None] * 4

    def work(k):
        got[k] = s.run({"x": xs[k]})

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(4):
        assert_close(got[k], ort_run(CLS, {"x": xs[k]}))


def test_bench_report():
    s = tpu_sdk.Session(EDGETPU_DATA / "convnet_f32.tflite", threads=1)
    r = s.bench(3, warmup=1)
    assert r["iterations"] == 3 and r["warmup"] == 1 and r["threads"] == 1 and r["target"] == "cpu"
    assert set(r["latency_ms"]) == {"min", "median", "p90", "mean", "max"}
    assert r["latency_ms"]["min"] <= r["latency_ms"]["median"] <= r["latency_ms"]["max"]
    assert r["throughput_per_s"] > 0


def test_inspect_and_devices():
    doc = tpu_sdk.inspect(EDGETPU_DATA / "convnet_int8.tflite")
    d = litert(EDGETPU_DATA / "convnet_int8.tflite").get_input_details()[0]
    assert doc["inputs"][0]["name"] == d["name"] and doc["inputs"][0]["shape"] == list(d["shape"])
    assert doc["inputs"][0]["dtype"] == "i8" and doc["inputs"][0]["layout"] == "NHWC"
    assert doc["macs"] > 0 and doc["nodes"] > 0
    cpu = tpu_sdk.devices("cpu")
    assert len(cpu) == 1 and cpu[0]["target"] == "cpu" and cpu[0]["state"] == "ready"
    assert tpu_sdk.targets()[0] == "cpu"
