"""Bad input raises the documented exception (with the CLI's message), never crashes the interpreter."""

import numpy as np
import pytest

import tpu_sdk
from conftest import EDGETPU_DATA, ROOT

CLS = ROOT / "examples" / "models" / "text_direction_cls.onnx"
INT8 = EDGETPU_DATA / "convnet_int8.tflite"


@pytest.fixture(scope="module")
def cls():
    return tpu_sdk.Session(CLS, input_shapes={"x": [1, 3, 48, 192]})


def test_exception_hierarchy():
    for e in (tpu_sdk.InputError, tpu_sdk.ModelError, tpu_sdk.DeviceError):
        assert issubclass(e, tpu_sdk.Error)
    assert issubclass(tpu_sdk.InputError, ValueError)


def test_wrong_dtype(cls):
    with pytest.raises(tpu_sdk.InputError, match=r"input 'x': expected float32\[1, 3, 48, 192\], given float64\[1, 3, 48, 192\]"):
        cls.run({"x": np.zeros((1, 3, 48, 192), np.float64)})


def test_wrong_shape(cls):
    with pytest.raises(tpu_sdk.InputError, match=r"input 'x': expected float32\[1, 3, 48, 192\], given float32\[1, 3, 48\]"):
        cls.run({"x": np.zeros((1, 3, 48), np.float32)})
    with pytest.raises(tpu_sdk.InputError, match=r"given float32\[1, 4, 48, 192\]"):
        cls.run({"x": np.zeros((1, 4, 48, 192), np.float32)})


def test_fixed_dims_are_checked_on_free_dim_models():
    s = tpu_sdk.Session(CLS)
    with pytest.raises(tpu_sdk.InputError, match=r"expected float32\[\?, 3, \?, \?\]"):
        s.run({"x": np.zeros((1, 1, 48, 192), np.float32)})


def test_unknown_and_missing_names(cls):
    x = np.zeros((1, 3, 48, 192), np.float32)
    with pytest.raises(tpu_sdk.InputError, match=r"the model has no input 'y' \(inputs: x\)"):
        cls.run({"x": x, "y": x})
    with pytest.raises(tpu_sdk.InputError, match="input 'x' is missing"):
        cls.run({})
    with pytest.raises(tpu_sdk.InputError):
        cls.run([x])
    with pytest.raises(tpu_sdk.InputError, match="expected a numpy array"):
        cls.run({"x": object()})


def test_corrupt_files(tmp_path):
    for name, data in [("bad.onnx", b"\x08\x07garbage" * 100), ("bad.tflite", INT8.read_bytes()[:600])]:
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(tpu_sdk.ModelError, match=f"cannot load {p}"):
            tpu_sdk.Session(p)
    with pytest.raises(tpu_sdk.ModelError, match="supported: .onnx, .tflite"):
        tpu_sdk.Session(ROOT / "README.md")


def test_missing_file(tmp_path):
    with pytest.raises(tpu_sdk.Error, match="nope.onnx"):
        tpu_sdk.Session(tmp_path / "nope.onnx")


def test_bad_arguments():
    with pytest.raises(tpu_sdk.InputError, match="unknown target 'gpu'"):
        tpu_sdk.Session(CLS, "gpu")
    with pytest.raises(tpu_sdk.InputError, match="threads must be at least 1"):
        tpu_sdk.Session(CLS, threads=0)
    with pytest.raises(tpu_sdk.InputError, match="unknown target"):
        tpu_sdk.devices("gpu")


def test_compile_errors(tmp_path):
    # another target's option: refused as the CLI refuses it (exit code 3 -> ModelError)
    with pytest.raises(tpu_sdk.ModelError, match="--topology applies to --target cloud-tpu only"):
        tpu_sdk.compile(INT8, "edgetpu", tmp_path / "o.tflite", topology="v5e:2x2")
    # an invalid value: clap's usage error (exit code 2 -> InputError)
    with pytest.raises(tpu_sdk.InputError, match="io-dtype"):
        tpu_sdk.compile(INT8, "edgetpu", tmp_path / "o.tflite", io_dtype="int4")


def test_interpreter_set_tensor_checks():
    from tpu_sdk.coral.interpreter import Interpreter

    it = Interpreter(model_path=str(INT8))
    it.allocate_tensors()
    d = it.get_input_details()[0]
    with pytest.raises(ValueError, match="Got value of type FLOAT32 but expected type INT8"):
        it.set_tensor(d["index"], np.zeros(d["shape"], np.float32))
    with pytest.raises(ValueError, match="Dimension mismatch"):
        it.set_tensor(d["index"], np.zeros((1, 2), np.int8))
    with pytest.raises(ValueError, match="Invalid tensor index"):
        it.get_tensor(99)
