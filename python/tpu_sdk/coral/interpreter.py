"""A ``tflite_runtime.interpreter.Interpreter``-compatible class over :class:`tpu_sdk.Session`.

What tflite_runtime's scripts use is here: ``allocate_tensors``, ``get_input_details`` /
``get_output_details`` (dicts with index, name, shape, shape_signature, dtype, quantization,
quantization_parameters, sparsity_parameters), ``set_tensor``, ``invoke``, ``get_tensor``, ``tensor``,
``resize_tensor_input``, ``get_signature_list``. Tensor indices are the TFLite file's own tensor numbers (as
tflite_runtime reports them) and the signature defs are the file's; only the inputs and outputs can be read.
"""

import json
import os
import tempfile
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

import tpu_sdk
from tpu_sdk import _native
from tpu_sdk._errors import Error, InputError


class TfliteIo(NamedTuple):
    """The TFLite file's own interface, read by the library's TFLite reader (``_native.tflite_interface``)."""

    inputs: List[int]
    outputs: List[int]
    tensor_names: Dict[int, str]
    # signature key -> {"inputs": {name: tensor index}, "outputs": {name: tensor index}, "subgraph_index": int}
    signatures: Dict[str, Dict[str, Any]]


class Delegate:
    """What :func:`load_delegate` returns: asks :class:`Interpreter` to run on the Edge TPU (``options``:
    ``{"device": "usb:0"}`` and so on, as libedgetpu's delegate takes them)."""

    def __init__(self, library: str = "libedgetpu.so.1", options: Optional[Dict[str, Any]] = None) -> None:
        self.library = library
        self.options = dict(options or {})

    def __repr__(self) -> str:
        return f"Delegate({self.library!r}, {self.options!r})"


def load_delegate(library: str, options: Optional[Dict[str, Any]] = None) -> Delegate:
    """tflite_runtime's ``load_delegate``: an Edge TPU delegate for any libedgetpu library name (tpu_sdk talks to
    the device itself; nothing is loaded)."""
    if "edgetpu" not in os.path.basename(str(library)):
        raise ValueError(f"Failed to load delegate from {library}: tpu_sdk only has the Edge TPU delegate")
    return Delegate(str(library), options)


def _file_io(path: str) -> Optional[TfliteIo]:
    """The TFLite file's input/output tensor numbers and signatures; None for another format or a file this
    reader cannot follow (the session's own errors say what is wrong with it)."""
    try:
        doc = json.loads(_native.tflite_interface(path))
    except Error:
        return None
    names = {int(t): str(n) for t, n in doc["inputs"] + doc["outputs"]}
    return TfliteIo([int(t) for t, _ in doc["inputs"]], [int(t) for t, _ in doc["outputs"]], names, doc["signatures"])


def _signature(shape: Sequence[Optional[int]]) -> np.ndarray:
    return np.array([-1 if d is None else d for d in shape], dtype=np.int32)


class Interpreter:
    """``Interpreter(model_path=None, model_content=None, experimental_delegates=None, num_threads=None)``.

    With an Edge TPU delegate among ``experimental_delegates`` the model runs on the Edge TPU (its ``device``
    option picks one); otherwise on tpu_sdk's CPU runtime. ``target`` / ``device`` choose directly.
    """

    def __init__(
        self,
        model_path: Optional[str] = None,
        model_content: Optional[bytes] = None,
        experimental_delegates: Optional[Sequence[Any]] = None,
        num_threads: Optional[int] = None,
        experimental_op_resolver_type: Any = None,
        experimental_preserve_all_tensors: bool = False,
        *,
        target: Optional[str] = None,
        device: Optional[str] = None,
    ) -> None:
        if (model_path is None) == (model_content is None):
            raise ValueError("Exactly one of model_path and model_content must be given")
        self._temp = None
        if model_content is not None:
            f = tempfile.NamedTemporaryFile(prefix="tpu_sdk_model_", suffix=".tflite", delete=False)
            f.write(bytes(model_content))
            f.close()
            self._temp = model_path = f.name
        for d in experimental_delegates or []:
            if isinstance(d, Delegate):
                target = target or "edgetpu"
                device = device or d.options.get("device") or None
        self._path = os.fspath(model_path)
        self._io = _file_io(self._path)
        self._target = target or "cpu"
        self._device = device
        self._threads = None if num_threads is None or num_threads < 1 else int(num_threads)
        self._shapes: Dict[str, List[int]] = {}
        self._signatures: Dict[int, np.ndarray] = {}
        self._session = self._open()
        self._bufs: List[Optional[np.ndarray]] = []
        self._allocated = False
        self._details()

    def _open(self) -> "tpu_sdk.Session":
        dev = self._device
        if dev is not None and dev.startswith(":"):
            dev = None  # ":N" (the N-th Edge TPU of any kind): the target's default device
        return tpu_sdk.Session(
            self._path, self._target, threads=self._threads, input_shapes=self._shapes or None, device=dev
        )

    def _details(self) -> None:
        s = self._session
        self._n_in = len(s.inputs)
        # the file's tensor numbers when they describe the session's inputs and outputs (same count and names,
        # in order), else positions: inputs first, then outputs
        io = self._io
        if (
            io is not None
            and [t.name for t in s.inputs] == [io.tensor_names[k] for k in io.inputs]
            and [t.name for t in s.outputs] == [io.tensor_names[k] for k in io.outputs]
        ):
            numbers = list(io.inputs) + list(io.outputs)
        else:
            numbers = list(range(self._n_in + len(s.outputs)))
        self._pos = {}
        for k, n in enumerate(numbers):
            self._pos.setdefault(n, k)
        self._in = [self._detail(numbers[i], t) for i, t in enumerate(s.inputs)]
        self._out = [self._detail(numbers[self._n_in + i], t) for i, t in enumerate(s.outputs)]

    def _detail(self, index: int, t: "tpu_sdk.TensorInfo") -> Dict[str, Any]:
        shape = [1 if d is None else d for d in t.shape]
        # the file's signature (-1 for free dims), kept across resize_tensor_input
        sig = self._signatures.setdefault(index, _signature(t.shape))
        if t.quantization is not None:
            scales, zps, axis = t.quantization
            quantization = (float(scales[0]), int(zps[0])) if len(scales) == 1 else (0.0, 0)
            params = {
                "scales": np.array(scales, dtype=np.float32),
                "zero_points": np.array(zps, dtype=np.int32),
                "quantized_dimension": int(axis or 0),
            }
        else:
            quantization = (0.0, 0)
            params = {"scales": np.array([], dtype=np.float32), "zero_points": np.array([], dtype=np.int32), "quantized_dimension": 0}
        return {
            "name": t.name,
            "index": index,
            "shape": np.array(shape, dtype=np.int32),
            "shape_signature": sig.copy(),
            "dtype": t.dtype.type,
            "quantization": quantization,
            "quantization_parameters": params,
            "sparsity_parameters": {},
        }

    @property
    def target(self) -> str:
        """Where the model runs: ``"cpu"`` or ``"edgetpu"`` (not part of tflite_runtime's API)."""
        return self._target

    def allocate_tensors(self) -> None:
        """Allocates the input and output buffers (again after :meth:`resize_tensor_input`). The input buffers
        are the runtime's own (``Session.input_array``): what :meth:`set_tensor` or ``tensor(i)()[...] = x``
        writes there is read in place by :meth:`invoke`, with no further copy."""
        ins = [self._session.input_array(d["name"], [int(x) for x in d["shape"]]) for d in self._in]
        self._bufs = ins + [np.zeros(tuple(d["shape"]), dtype=d["dtype"]) for d in self._out]
        self._allocated = True

    def _need_allocated(self) -> None:
        if not self._allocated:
            raise RuntimeError("Invoke called on model that is not ready. (call allocate_tensors() first)")

    def get_input_details(self) -> List[Dict[str, Any]]:
        return [dict(d) for d in self._in]

    def get_output_details(self) -> List[Dict[str, Any]]:
        return [dict(d) for d in self._out]

    def get_signature_list(self) -> Dict[str, Any]:
        """The file's signatures: ``{key: {"inputs": [names], "outputs": [names]}}``."""
        return {
            k: {"inputs": list(v["inputs"]), "outputs": list(v["outputs"])}
            for k, v in self._get_full_signature_list().items()
        }

    def _get_full_signature_list(self) -> Dict[str, Any]:
        """The file's signatures with tensor numbers: ``{key: {"inputs": {name: index}, "outputs": {...}}}``
        (what pycoral's ``detect.get_objects`` reads)."""
        if self._io is None:
            return {}
        return {
            k: {"inputs": dict(v["inputs"]), "outputs": dict(v["outputs"])}
            for k, v in self._io.signatures.items()
            if v.get("subgraph_index", 0) == 0
        }

    def _index(self, tensor_index: int) -> int:
        """The buffer position of tensor number ``tensor_index`` (an input or an output)."""
        i = int(tensor_index)
        if i not in self._pos:
            known = sorted(self._pos)
            raise ValueError(
                f"Invalid tensor index {i}: only the model's inputs and outputs can be accessed "
                f"(tensors {known})"
            )
        return self._pos[i]

    def resize_tensor_input(self, input_index: int, tensor_size: Sequence[int], strict: bool = False) -> None:
        """Gives input ``input_index`` a new shape; call :meth:`allocate_tensors` before the next invoke."""
        i = self._index(input_index)
        if i >= self._n_in:
            raise ValueError(f"Tensor {input_index} is not an input")
        d = self._in[i]
        size = [int(x) for x in tensor_size]
        sig = d["shape_signature"]
        if len(size) != len(sig) or (strict and any(s != -1 and s != n for s, n in zip(sig, size))):
            raise InputError(f"Cannot resize input '{d['name']}' of shape {list(d['shape'])} to {size}")
        self._shapes[d["name"]] = size
        self._session = self._open()
        self._details()
        self._allocated = False

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        """Copies ``value`` into input ``tensor_index`` (its dtype and shape must be the input's)."""
        self._need_allocated()
        i = self._index(tensor_index)
        if i >= self._n_in:
            raise ValueError(f"Tensor {tensor_index} is an output: only inputs can be set")
        d = self._in[i]
        v = np.asarray(value)
        if v.dtype != np.dtype(d["dtype"]):
            raise InputError(
                f"Cannot set tensor: Got value of type {v.dtype.name.upper()} but expected type "
                f"{np.dtype(d['dtype']).name.upper()} for input {tensor_index}, name: {d['name']} "
            )
        if tuple(v.shape) != tuple(d["shape"]):
            raise InputError(
                f"Cannot set tensor: Dimension mismatch. Got {list(v.shape)} but expected {list(d['shape'])} "
                f"for input {tensor_index}."
            )
        np.copyto(self._bufs[i], v)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of tensor ``tensor_index`` (an input or, after :meth:`invoke`, an output)."""
        self._need_allocated()
        return self._bufs[self._index(tensor_index)].copy()

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A function returning the tensor's buffer itself (writable for inputs: ``tensor(i)()[...] = x``)."""
        i = self._index(tensor_index)

        def view() -> np.ndarray:
            self._need_allocated()
            return self._bufs[i]

        return view

    def invoke(self) -> None:
        """Runs the model on the input buffers; the outputs land in the output buffers."""
        self._need_allocated()
        feeds = {d["name"]: self._bufs[k] for k, d in enumerate(self._in)}
        outs = self._session.run(feeds)
        for k, (d, v) in enumerate(zip(self._out, outs.values())):
            j = self._n_in + k
            if self._bufs[j].shape == v.shape and self._bufs[j].dtype == v.dtype:
                np.copyto(self._bufs[j], v)
            else:
                self._bufs[j] = v
                d["shape"] = np.array(v.shape, dtype=np.int32)

    def _native_handle(self) -> "Interpreter":
        return self

    def __del__(self) -> None:
        if getattr(self, "_temp", None):
            try:
                os.unlink(self._temp)
            except OSError:
                pass
