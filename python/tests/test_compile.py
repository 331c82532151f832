"""tpu_sdk.compile for the Edge TPU (an int8 TFLite file LiteRT loads and runs) and for Cloud TPUs (StableHLO
text), returning the CLI's JSON report."""

import json
import subprocess
import sys

import numpy as np

import tpu_sdk
from conftest import EDGETPU_DATA, ROOT, litert

F32 = EDGETPU_DATA / "convnet_f32.tflite"


def test_edgetpu_int8_file_runs_in_litert_bit_equal(tmp_path):
    cal = np.random.default_rng(0).standard_normal((8, 16, 16, 3)).astype(np.float32)
    out = tmp_path / "convnet_int8.tflite"
    report = tpu_sdk.compile(F32, "edgetpu", out, calibration=cal)
    assert out.exists() and isinstance(report, dict) and report
    peer = litert(out)
    peer.allocate_tensors()
    d = peer.get_input_details()[0]
    assert d["dtype"] == np.int8
    # the same file through the Interpreter-compatible class: bit-equal to LiteRT
    from tpu_sdk.coral.interpreter import Interpreter

    ours = Interpreter(model_path=str(out))
    ours.allocate_tensors()
    x = np.random.default_rng(1).integers(-128, 128, size=d["shape"]).astype(np.int8)
    peer.set_tensor(d["index"], x)
    ours.set_tensor(ours.get_input_details()[0]["index"], x)
    peer.invoke()
    ours.invoke()
    for a, b in zip(peer.get_output_details(), ours.get_output_details()):
        np.testing.assert_array_equal(ours.get_tensor(b["index"]), peer.get_tensor(a["index"]))


def test_report_is_the_cli_json(tmp_path):
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(2).standard_normal((4, 16, 16, 3)).astype(np.float32))
    report = tpu_sdk.compile(F32, "edgetpu", tmp_path / "a.tflite", calibration=cal, io_dtype="float")
    cli = subprocess.run(
        [sys.executable, "-m", "tpu_sdk", "compile", str(F32), "--target", "edgetpu", "-o", str(tmp_path / "b.tflite"),
         "--calibration", str(cal), "--io-dtype", "float", "--json"],
        capture_output=True, text=True, check=True,
    )
    doc = json.loads(cli.stdout)
    assert set(doc) == set(report)
    assert (tmp_path / "a.tflite").read_bytes() == (tmp_path / "b.tflite").read_bytes()
    assert litert(tmp_path / "a.tflite").get_input_details()[0]["dtype"] == np.float32


def test_cloud_tpu_stablehlo_text(tmp_path):
    out = tmp_path / "cls.mlir"
    report = tpu_sdk.compile(ROOT / "examples" / "models" / "text_direction_cls.onnx", "cloud-tpu", out,
                             input_shapes={"x": [1, 3, 48, 192]})
    text = out.read_text()
    assert "func.func public @main" in text or "func.func @main" in text
    assert "stablehlo.convolution" in text
    assert "tensor<1x3x48x192xf32>" in text
    assert isinstance(report, dict)


def test_cloud_tpu_emit_mlir_bf16(tmp_path):
    out = tmp_path / "conv.txt"
    tpu_sdk.compile(F32, "cloud-tpu", out, emit="mlir", dtype="bf16")
    assert "bf16" in out.read_text()


def test_ctrl_c_interrupts_a_compile(tmp_path):
    # SIGINT during a compile raises KeyboardInterrupt at once (the compile stops at its next step, writing
    # nothing); in a child process so that the signal stays there
    from conftest import ZOO, need

    m = need(ZOO / "keras_mobilenet_v2_035_96")
    out = tmp_path / "m.tflite"
    # 256 calibration samples: a few seconds of calibration in a release build, a signal 0.5 s in lands in it
    cal = np.load(m / "cal.npy")
    cal_path = tmp_path / "cal.npy"
    np.save(cal_path, np.concatenate([cal] * (256 // len(cal) + 1))[:256])
    code = f"""
import os, signal, threading, tpu_sdk
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    tpu_sdk.compile({str(m / "model.tflite")!r}, "edgetpu", {str(out)!r}, calibration={str(cal_path)!r})
    print("finished before the signal")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if "finished before the signal" in r.stdout:
        import pytest

        pytest.skip("the compile finished before the signal came")
    assert r.stdout.strip() == "KeyboardInterrupt", r.stdout + r.stderr
