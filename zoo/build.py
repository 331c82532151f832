"""Builds or fetches every zoo model into .cache/zoo/models (idempotent: a built model is skipped).

    python3 zoo/build.py [--fast] [--no-torch]

Keras models with TensorFlow's converter (.venv-tf), PyPI wheels' pretrained models (.venv), PyTorch / HF
architectures exported to ONNX in the zoo's own venv (.cache/zoo/venv-torch, created here: torch's PyPI wheel and
its CUDA runtime wheels, about 5.5 GB; the export runs on the CPU). `--fast` builds the CI subset only.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAST = ["keras_mobilenet_v2_035_96", "keras_transformer", "keras_unet", "ocr_ppocr_mobile_cls",
        "mp_face_detection_short_range", "mp_hand_recrop", "silero_vad_16k", "silero_vad_8k16k"]
TORCH_PINS = ["torch==2.15.0", "torchvision==0.29.2", "onnx==1.23.2", "onnxscript==0.7.2", "transformers==5.25.0"]


def py(venv):
    p = os.path.join(common.ROOT, venv, "bin", "python")
    if not os.path.isfile(p):
        sys.exit(f"error: {p} is missing; `bash scripts/test.sh` sets up .venv and .venv-tf")
    return p


def run(python, script, env):
    print(f"== {script}", flush=True)
    r = subprocess.run([python, "-W", "ignore", os.path.join(common.ROOT, "zoo", script)], env=env)
    if r.returncode != 0:
        print(f"warning: {script} exited {r.returncode}", flush=True)


def torch_venv():
    venv = os.path.join(common.CACHE, "venv-torch")
    python = os.path.join(venv, "bin", "python")
    if not os.path.isfile(os.path.join(venv, ".complete")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + TORCH_PINS,
                       check=True)
        open(os.path.join(venv, ".complete"), "w").close()
    return python


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fast", action="store_true", help="only the CI subset")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch / HF models (no 5.5 GB venv)")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.fast:
        env["ZOO_ONLY"] = ",".join(FAST)
    os.makedirs(common.MODELS, exist_ok=True)
    run(py(".venv-tf"), "build_keras.py", env)
    run(py(".venv"), "build_wheels.py", env)
    if not a.fast and not a.no_torch:
        run(torch_venv(), "build_torch.py", env)


if __name__ == "__main__":
    main()
