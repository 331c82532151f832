"""tpu_sdk.coral: the Interpreter-compatible class is bit-equal to LiteRT on int8 models and describes tensors as
LiteRT does; classify.get_classes / detect.get_objects follow pycoral's documented semantics; pycoral's
classify_image.py example, imports changed only, gives LiteRT's top class."""

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import tpu_sdk
from conftest import DATA, EDGETPU_DATA, ROOT, ZOO, litert, need, random_input
from tpu_sdk.coral import interpreter as tflite
from tpu_sdk.coral.adapters import classify, common, detect
from tpu_sdk.coral.utils import dataset, edgetpu

INT8_MODELS = [
    EDGETPU_DATA / "convnet_int8.tflite",
    DATA / "classifier_uint8.tflite",
    ROOT / "core" / "tests" / "data" / "int8" / "mlp_int8_fio.tflite",
    ZOO / "keras_mobilenet_v2_035_96" / "peer_int8.tflite",
]


@pytest.mark.parametrize("path", INT8_MODELS, ids=lambda p: p.name if p.parent.name == "data" else p.parent.name)
def test_interpreter_is_bit_equal_to_litert(path):
    need(path)
    peer, ours = litert(path), tflite.Interpreter(model_path=str(path))
    peer.allocate_tensors()
    ours.allocate_tensors()
    # the file's own tensor numbers and signature defs, as LiteRT reports them
    assert [d["index"] for d in ours.get_input_details()] == [d["index"] for d in peer.get_input_details()]
    assert [d["index"] for d in ours.get_output_details()] == [d["index"] for d in peer.get_output_details()]
    assert ours._get_full_signature_list() == peer._get_full_signature_list()
    assert ours.get_signature_list() == peer.get_signature_list()
    for a, b in zip(peer.get_input_details(), ours.get_input_details()):
        for key in ("name", "dtype", "quantization"):
            assert a[key] == b[key], key
        np.testing.assert_array_equal(a["shape"], b["shape"])
        np.testing.assert_array_equal(a["shape_signature"], b["shape_signature"])
        for key in ("scales", "zero_points"):
            np.testing.assert_array_equal(a["quantization_parameters"][key], b["quantization_parameters"][key])
    for seed in range(3):
        for a, b in zip(peer.get_input_details(), ours.get_input_details()):
            x = random_input(a["dtype"], a["shape"], seed=seed)
            peer.set_tensor(a["index"], x)
            ours.set_tensor(b["index"], x)
        peer.invoke()
        before = tpu_sdk._native._input_bytes_copied()
        ours.invoke()
        assert tpu_sdk._native._input_bytes_copied() == before, "invoke copied its input buffers"
        for a, b in zip(peer.get_output_details(), ours.get_output_details()):
            assert (a["name"], a["dtype"], a["quantization"]) == (b["name"], b["dtype"], b["quantization"])
            np.testing.assert_array_equal(ours.get_tensor(b["index"]), peer.get_tensor(a["index"]))
            np.testing.assert_array_equal(ours.tensor(b["index"])(), peer.tensor(a["index"])())


def test_tensor_numbers_and_signatures_are_the_files():
    # a TF-converted Keras model: signature 'serving_default', output tensor 67 (not position 1)
    path = ZOO / "keras_unet" / "model.tflite"
    need(path)
    peer, ours = litert(path), tflite.Interpreter(model_path=str(path))
    assert ours._get_full_signature_list() == peer._get_full_signature_list() != {}
    assert ours.get_signature_list() == peer.get_signature_list()
    (inp,), (out,) = ours.get_input_details(), ours.get_output_details()
    assert (inp["index"], out["index"]) == (peer.get_input_details()[0]["index"], peer.get_output_details()[0]["index"])
    assert out["index"] != 1
    ours.allocate_tensors()
    peer.allocate_tensors()
    x = random_input(np.float32, inp["shape"], seed=3)
    ours.set_tensor(inp["index"], x)
    peer.set_tensor(inp["index"], x)
    ours.invoke()
    peer.invoke()
    np.testing.assert_allclose(ours.get_tensor(out["index"]), peer.get_tensor(out["index"]), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="only the model's inputs and outputs"):
        ours.get_tensor(1)
    with pytest.raises(ValueError, match="is an output"):
        ours.set_tensor(out["index"], np.zeros(out["shape"], np.float32))


def test_model_content_and_run_inference():
    path = DATA / "classifier_uint8.tflite"
    ours = edgetpu.make_interpreter(path.read_bytes())
    ours.allocate_tensors()
    assert ours.target == "cpu"  # no Edge TPU on this machine
    peer = litert(path)
    peer.allocate_tensors()
    x = random_input(np.uint8, (1, 32, 32, 3), seed=4)
    edgetpu.run_inference(ours, x.reshape(-1))
    peer.set_tensor(peer.get_input_details()[0]["index"], x)
    peer.invoke()
    np.testing.assert_array_equal(common.output_tensor(ours, 0), common.output_tensor(peer, 0))
    with pytest.raises(ValueError, match="input size=10"):
        edgetpu.run_inference(ours, bytes(10))


def test_common_set_input_writes_the_input_buffer():
    ours = edgetpu.make_interpreter(str(DATA / "classifier_uint8.tflite"))
    ours.allocate_tensors()
    assert common.input_size(ours) == (32, 32)
    img = random_input(np.uint8, (32, 32, 3), seed=6)
    common.set_input(ours, img)
    np.testing.assert_array_equal(ours.get_tensor(ours.get_input_details()[0]["index"])[0], img)


def test_get_classes_semantics():
    # pycoral: scores flattened and dequantized (scale * (q - zero_point)); the top_k highest with
    # score >= threshold, sorted by score, best first
    path = DATA / "classifier_uint8.tflite"
    for it in (litert(path), tflite.Interpreter(model_path=str(path))):
        it.allocate_tensors()
        common.set_input(it, random_input(np.uint8, (32, 32, 3), seed=8))
        it.invoke()
        d = it.get_output_details()[0]
        q = it.get_tensor(d["index"]).reshape(-1).astype(np.int64)
        scale, zp = d["quantization"]
        scores = scale * (q - zp)
        np.testing.assert_array_equal(classify.get_scores(it), scores)
        assert classify.num_classes(it) == 8
        ranked = sorted(range(8), key=lambda i: -scores[i])
        top = classify.get_classes(it, top_k=3)
        assert [c.score for c in top] == sorted([scores[i] for i in ranked[:3]], reverse=True)
        assert set(c.id for c in top) <= set(np.argsort(-scores, kind="stable")[:3].tolist()) | {i for i in range(8) if scores[i] == top[-1].score}
        thr = scores[ranked[1]]
        assert all(c.score >= thr for c in classify.get_classes(it, score_threshold=thr))
        assert len(classify.get_classes(it)) == 8
    assert classify.get_classes_from_scores(np.array([0.1, 0.7, 0.2]), top_k=2) == [classify.Class(1, 0.7), classify.Class(2, 0.2)]
    assert classify.get_classes_from_scores(np.array([0.1, 0.7, 0.2]), score_threshold=0.15) == [classify.Class(1, 0.7), classify.Class(2, 0.2)]


def _ssd_image():
    raw = np.zeros(768, np.float32)
    raw[0:16] = [0.1, 0.2, 0.5, 0.6,  0.0, 0.0, 1.0, 1.0,  0.25, 0.5, 0.75, 0.875,  0.3, 0.3, 0.4, 0.4]  # ymin xmin ymax xmax
    raw[16:20] = [3, 1, 7, 2]  # classes
    raw[20:24] = [0.9, 0.2, 0.6, 0.05]  # scores
    raw[24] = 3  # count
    return raw.reshape(1, 16, 16, 3)


def test_get_objects_semantics():
    path = DATA / "ssd_outputs.tflite"
    for it in (litert(path), tflite.Interpreter(model_path=str(path))):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], _ssd_image())
        it.invoke()
        # input 16x16; boxes scaled by (16 / sx, 16 / sy) and truncated to int; every slot with score >= threshold
        objs = detect.get_objects(it, score_threshold=0.5)
        assert objs == [
            detect.Object(id=3, score=pytest.approx(0.9), bbox=detect.BBox(xmin=3, ymin=1, xmax=9, ymax=8)),
            detect.Object(id=7, score=pytest.approx(0.6), bbox=detect.BBox(xmin=8, ymin=4, xmax=14, ymax=12)),
        ]
        objs = detect.get_objects(it, image_scale=(0.5, 0.25))  # the image was resized by 0.5 (x) and 0.25 (y)
        assert [o.id for o in objs] == [3, 1, 7, 2]
        assert objs[1].bbox == detect.BBox(xmin=0, ymin=0, xmax=32, ymax=64)
        assert objs[3].bbox == detect.BBox(xmin=9, ymin=19, xmax=12, ymax=25)
    b = detect.BBox(0, 0, 4, 4)
    assert detect.BBox.iou(b, detect.BBox(2, 2, 6, 6)) == pytest.approx(4 / 28)
    assert detect.BBox.iou(b, detect.BBox(5, 5, 6, 6)) == 0.0


def test_get_objects_tf2_output_order():
    # scores, boxes, count, classes (output 3 holds more than one value): a stand-in interpreter
    class Fake:
        outs = [np.array([[0.8, 0.1]]), np.array([[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]]]), np.array([2.0]), np.array([[4.0, 5.0]])]

        def _get_full_signature_list(self):
            return {}

        def get_output_details(self):
            return [{"index": 10 + i} for i in range(4)]

        def get_input_details(self):
            return [{"index": 0, "shape": np.array([1, 100, 200, 3])}]

        def tensor(self, i):
            return lambda: self.outs[i - 10]

    objs = detect.get_objects(Fake(), score_threshold=0.5)
    assert objs == [detect.Object(4, 0.8, detect.BBox(0, 0, 100, 50))]


def test_read_label_file(tmp_path):
    p = tmp_path / "labels.txt"
    p.write_text("0:cat\n1 dog house\nbird\n7  fish\n")
    assert dataset.read_label_file(str(p)) == {0: "cat", 1: "dog house", 2: "bird", 7: "fish"}


def test_list_edge_tpus_and_delegate():
    assert edgetpu.list_edge_tpus() == []  # none on this machine
    d = tflite.load_delegate("libedgetpu.so.1", {"device": "usb:0"})
    assert d.options == {"device": "usb:0"}
    assert edgetpu.get_runtime_version().startswith("tpu-sdk ")


def test_pycoral_classify_image_example_gives_litert_top_class(tmp_path):
    model = DATA / "classifier_uint8.tflite"
    image = ROOT / "examples" / "images" / "text_upright.png"
    out = subprocess.run(
        [sys.executable, str(DATA.parent / "examples" / "classify_image.py"), "-m", str(model), "-i", str(image),
         "-l", str(DATA / "classifier_uint8.labels.txt"), "-k", "3", "-c", "2"],
        capture_output=True, text=True, check=True,
    )
    results = out.stdout.split("-------RESULTS--------\n")[1].strip().splitlines()
    # LiteRT on the same input (the example's preprocessing: resize to 32x32 with LANCZOS; the model's input
    # scale is ~1 and zero point 0, off the example's 128/128 normalisation, so it quantizes as written)
    peer = litert(model)
    peer.allocate_tensors()
    d = peer.get_input_details()[0]
    img = np.asarray(Image.open(image).convert("RGB").resize((32, 32), Image.LANCZOS))
    scale, zp = d["quantization_parameters"]["scales"], d["quantization_parameters"]["zero_points"]
    x = (img - 128.0) / (128.0 * scale) + zp
    np.clip(x, 0, 255, out=x)
    peer.set_tensor(d["index"], x.astype(np.uint8)[None])
    peer.invoke()
    expected = classify.get_classes(peer, 3, 0.0)
    labels = dataset.read_label_file(str(DATA / "classifier_uint8.labels.txt"))
    assert results == ["%s: %.5f" % (labels[c.id], c.score) for c in expected]
