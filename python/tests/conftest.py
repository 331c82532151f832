"""Shared paths and peers of the Python package's tests (run by scripts/test_python.sh against the built wheel,
installed in a fresh venv with numpy, pytest, onnxruntime, ai-edge-litert and pillow)."""

import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(__file__).resolve().parent / "data"
ZOO = ROOT / ".cache" / "zoo" / "models"
EDGETPU_DATA = ROOT / "targets" / "edgetpu" / "tests" / "data"


def need(path: pathlib.Path) -> pathlib.Path:
    """``path``, or skips the test when it is absent (the zoo's models exist once ``zoo/run.sh --fast`` ran, as
    in CI; ``TPU_SDK_REQUIRE_ZOO=1`` makes their absence a failure)."""
    if not path.exists():
        if os.environ.get("TPU_SDK_REQUIRE_ZOO") == "1":
            pytest.fail(f"{path} is missing")
        pytest.skip(f"{path} is missing (run zoo/run.sh --fast)")
    return path


def litert(path, **kw):
    """LiteRT's interpreter with its builtin kernels (no default XNNPACK delegate: the kernels tpu-sdk's int8
    runtime is bit-equal to)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    return Interpreter(
        model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, **kw
    )


def random_input(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)
    return rng.standard_normal(shape).astype(dt)


@pytest.fixture
def root():
    return ROOT
