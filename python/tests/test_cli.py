"""python -m tpu_sdk is the tpu-sdk command line: same arguments, output and exit codes."""

import json
import subprocess
import sys

import tpu_sdk
from conftest import EDGETPU_DATA, ROOT


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tpu_sdk", *map(str, args)], capture_output=True, text=True)


def test_inspect_json_matches_the_function():
    r = cli("inspect", EDGETPU_DATA / "convnet_int8.tflite", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tpu_sdk.inspect(EDGETPU_DATA / "convnet_int8.tflite")


def test_exit_codes():
    assert cli("--help").returncode == 0
    assert "Run neural networks" in cli("--help").stdout
    r = cli("inspect", ROOT / "README.md")
    assert r.returncode == 3 and r.stderr.startswith("error: cannot load")
    assert cli("run").returncode == 2  # clap: missing argument
    r = cli("run", ROOT / "examples" / "models" / "text_direction_cls.onnx", "--input", "y=" + str(EDGETPU_DATA / "convnet_f32.input_0.npy"))
    assert r.returncode == 2 and "no input 'y'" in r.stderr
    assert cli("devices", "--target", "cpu", "--json").returncode == 0


def test_the_package_under_test_is_the_installed_wheel():
    # scripts/test_python.sh installs the wheel into a fresh venv: tpu_sdk must come from there, not from python/
    assert "site-packages" in tpu_sdk.__file__, tpu_sdk.__file__
