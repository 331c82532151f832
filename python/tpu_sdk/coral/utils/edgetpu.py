"""pycoral.utils.edgetpu: make_interpreter, list_edge_tpus, run_inference, load_edgetpu_delegate.

``make_interpreter`` runs the model on an Edge TPU when tpu_sdk finds one (USB or PCIe, through its edgetpu
target's device discovery) and on tpu_sdk's CPU runtime otherwise, so the same script works on a laptop. An
``_edgetpu.tflite`` model (compiled by edgetpu_compiler) needs the device; the int8 ``.tflite`` it was compiled
from runs on either.
"""

import os
from typing import Any, Dict, List, Optional, Union

import numpy as np

import tpu_sdk
from tpu_sdk.coral.interpreter import Delegate, Interpreter


def get_runtime_version() -> str:
    """The runtime's version (tpu_sdk's, in place of libedgetpu's)."""
    return f"tpu-sdk {tpu_sdk.__version__}"


def list_edge_tpus() -> List[Dict[str, str]]:
    """The Edge TPUs found: ``[{"type": "usb" | "pci", "path": ...}]`` as pycoral lists them."""
    if "edgetpu" not in tpu_sdk.targets():
        return []
    try:
        found = tpu_sdk.devices("edgetpu")
    except tpu_sdk.Error:
        return []
    out = []
    for d in found:
        kind = "pci" if str(d.get("id", "")).startswith("pci") else "usb"
        out.append({"type": kind, "path": d.get("location", "")})
    return out


def _edgetpu_present(device: Optional[str]) -> bool:
    tpus = list_edge_tpus()
    if device is None or device.startswith(":"):
        return bool(tpus)
    kind = device.split(":")[0]
    return any(t["type"] == kind for t in tpus)


def load_edgetpu_delegate(options: Optional[Dict[str, Any]] = None) -> Delegate:
    """The Edge TPU delegate (``options``: ``{"device": "usb:0"}``...)."""
    return Delegate("libedgetpu.so.1", options or {})


def make_interpreter(model_path_or_content: Union[str, bytes, "os.PathLike[str]"], device: Optional[str] = None, delegate: Optional[Delegate] = None) -> Interpreter:
    """A new :class:`~tpu_sdk.coral.interpreter.Interpreter` for the model (a path, or the model's bytes).

    ``device``: ``None`` (any Edge TPU), ``":N"``, ``"usb"``, ``"usb:N"``, ``"pci"``, ``"pci:N"``. The model runs on
    that Edge TPU when one is present, otherwise on the CPU runtime (``interpreter.target`` tells which).
    """
    if delegate is not None:
        device = delegate.options.get("device", device)
    on_tpu = _edgetpu_present(device)
    kw: Dict[str, Any] = {"target": "edgetpu" if on_tpu else "cpu"}
    if on_tpu and device and ":" in device and not device.startswith(":"):
        kw["device"] = device
    if isinstance(model_path_or_content, (bytes, bytearray)):
        return Interpreter(model_content=bytes(model_path_or_content), **kw)
    return Interpreter(model_path=os.fspath(model_path_or_content), **kw)


def run_inference(interpreter: Interpreter, input_data: Any) -> None:
    """Sets input 0 from raw bytes or a 1-D uint8 numpy array (at least as many bytes as the input holds) and
    invokes the interpreter."""
    d = interpreter.get_input_details()[0]
    shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
    need = int(np.prod(shape)) * dtype.itemsize
    if isinstance(input_data, (bytes, bytearray, memoryview)):
        raw = np.frombuffer(input_data, dtype=np.uint8)
    elif isinstance(input_data, np.ndarray):
        raw = np.ascontiguousarray(input_data).reshape(-1).view(np.uint8)
    else:
        raise TypeError("input data type is not supported.")
    if raw.size < need:
        raise ValueError(f"input size={raw.size}, expected={need}.")
    interpreter.set_tensor(d["index"], raw[:need].view(dtype).reshape(shape))
    interpreter.invoke()
