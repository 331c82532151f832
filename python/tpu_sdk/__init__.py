"""tpu_sdk: run neural networks on the CPU, Coral Edge TPUs and Cloud TPUs; compile them for the TPUs.

>>> import numpy as np, tpu_sdk
>>> s = tpu_sdk.Session("model.onnx")                       # doctest: +SKIP
>>> s.run({"x": np.zeros((1, 3, 224, 224), np.float32)})     # doctest: +SKIP

See python/README.md for the whole API; ``tpu_sdk.coral`` is the pycoral-compatible layer.
"""

import json as _json
import os as _os
import tempfile as _tempfile
import warnings as _warnings
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as _np

from tpu_sdk import _native
from tpu_sdk._errors import DeviceError, Error, InputError, ModelError

__version__ = _native.__version__

__all__ = [
    "Session",
    "TensorInfo",
    "compile",
    "devices",
    "inspect",
    "targets",
    "Error",
    "InputError",
    "ModelError",
    "DeviceError",
    "__version__",
]

PathLike = Union[str, "_os.PathLike[str]"]


class TensorInfo(NamedTuple):
    """A model input or output: its name, numpy dtype, shape (``None`` for a dimension the file leaves free)
    and quantization (``(scales, zero_points, axis)`` for a quantized tensor, else ``None``)."""

    name: str
    dtype: _np.dtype
    shape: Tuple[Optional[int], ...]
    quantization: Optional[Tuple[List[float], List[int], Optional[int]]] = None


def _info(d: Dict[str, Any]) -> TensorInfo:
    q = d["quantization"]
    return TensorInfo(d["name"], _np.dtype(d["dtype"]), tuple(d["shape"]), None if q is None else (list(q[0]), list(q[1]), q[2]))


def targets() -> List[str]:
    """The targets this build has, the default (``cpu``) first."""
    return list(_native.targets())


class Session:
    """A model loaded and prepared for a target.

    ``Session(path, target="cpu", *, threads=None, input_shapes=None, plugin=None, device=None)``

    - ``path``: an ``.onnx`` or ``.tflite`` file (an Edge TPU-compiled ``.tflite`` with ``target="edgetpu"``).
    - ``target``: ``"cpu"``, ``"edgetpu"``, ``"cloud-tpu"`` (see :func:`targets`).
    - ``threads``: worker threads for the CPU runtime (default: all cores).
    - ``input_shapes``: ``{name: shape}`` for inputs with free dimensions; dimensions left free may change
      from run to run (the model is prepared again for each new shape; the last four are kept).
    - ``plugin`` (cloud-tpu): the PJRT plugin library; ``device``: ``"usb:0"``, ``"pci:0"`` (edgetpu) or a device
      index (cloud-tpu), as ``tpu-sdk devices`` lists them.

    Raises :class:`ModelError` for a file that cannot be loaded, :class:`DeviceError` for a missing device.
    """

    def __init__(
        self,
        path: PathLike,
        target: str = "cpu",
        *,
        threads: Optional[int] = None,
        input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
        plugin: Optional[PathLike] = None,
        device: Optional[Union[str, int]] = None,
    ) -> None:
        shapes = None if input_shapes is None else {str(k): [int(d) for d in v] for k, v in input_shapes.items()}
        self._native = _native.NativeSession(
            _os.fspath(path),
            target,
            threads,
            shapes,
            None if plugin is None else _os.fspath(plugin),
            None if device is None else str(device),
        )
        self.inputs: List[TensorInfo] = [_info(d) for d in self._native.inputs]
        self.outputs: List[TensorInfo] = [_info(d) for d in self._native.outputs]

    @property
    def target(self) -> str:
        """The target the model runs on."""
        return self._native.target

    @property
    def path(self) -> str:
        """The model file."""
        return str(self._native.path)

    def _feeds(self, feeds: Mapping[str, Any]) -> Dict[str, _np.ndarray]:
        if not isinstance(feeds, Mapping):
            raise InputError(f"feeds must be a dict of input name -> numpy array, not {type(feeds).__name__}")
        dtypes = {i.name: i.dtype for i in self.inputs}
        out = {}
        for k, v in feeds.items():
            if not isinstance(v, _np.ndarray):
                # Python numbers and lists take the input's dtype; an array of another dtype is an error.
                try:
                    v = _np.asarray(v, dtype=dtypes.get(k))
                except (TypeError, ValueError) as e:
                    raise InputError(f"input '{k}': expected a numpy array, given {type(v).__name__} ({e})") from None
            out[k] = v
        return out

    def input_array(self, name: str, shape: Optional[Sequence[int]] = None) -> _np.ndarray:
        """A zeroed numpy array for input ``name`` that :meth:`run` reads in place, with no copy: fill it
        (``a[...] = x``, or decode an image into it) and pass it in the feeds, as often as you like. ``shape``
        is needed for inputs with free dimensions. Arrays from anywhere else are copied once per run.

        The array's memory is the runtime's: do not write to it from another thread while a run that reads
        it is in progress (the GIL is released during runs). A bf16 input gives a float32 array, converted on
        each run.

        Raises :class:`InputError` for an unknown name or a shape that does not fit the input."""
        return self._native.input_array(name, None if shape is None else [int(d) for d in shape])

    def run(self, feeds: Mapping[str, Any]) -> Dict[str, _np.ndarray]:
        """Runs the model on ``feeds`` (input name → numpy array of the input's dtype and shape) and returns
        output name → numpy array, in the model's output order. The GIL is released while the model runs.

        Copies: arrays from :meth:`input_array` are read in place; other arrays are copied once. Outputs are
        new arrays that take over the runtime's buffers (not copied).

        Raises :class:`InputError` for an unknown or missing input name or an array of another dtype or
        shape than the input's."""
        return dict(self._native.run(self._feeds(feeds)))

    def bench(self, iterations: int = 50, *, warmup: int = 5, feeds: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Times ``iterations`` runs after ``warmup`` untimed ones, on ``feeds`` or on the deterministic random
        inputs ``tpu-sdk bench`` uses, and returns the document ``tpu-sdk bench --json`` prints (latency_ms
        min/median/p90/mean/max, throughput_per_s, cpu_ms_per_run, peak_resident_bytes, ...). Ctrl-C stops it
        between runs."""
        return _json.loads(self._native.bench(iterations, warmup, None if feeds is None else self._feeds(feeds)))

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in self.inputs)
        return f"Session({self.path!r}, target={self.target!r}, inputs=[{ins}])"


def _flag(argv: List[str], name: str, value: Any) -> None:
    if value is not None:
        argv += [name, str(value)]


def compile(
    path: PathLike,
    target: str,
    output: PathLike,
    *,
    calibration: Union[None, PathLike, _np.ndarray] = None,
    method: str = "minmax",
    io_dtype: str = "int8",
    topology: Optional[str] = None,
    dtype: str = "f32",
    replicas: Optional[int] = None,
    shard: Union[None, str, Sequence[str]] = None,
    emit: Optional[str] = None,
    plugin: Optional[PathLike] = None,
    eval: Union[None, PathLike, _np.ndarray] = None,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    mean: Union[None, float, Sequence[float]] = None,
    std: Union[None, float, Sequence[float]] = None,
    edgetpu_compiler: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """Compiles a model for a target as ``tpu-sdk compile`` does and returns the report it prints with
    ``--json``.

    - ``edgetpu``: an int8 TFLite model (and the Edge TPU model when ``edgetpu_compiler`` is found);
      ``calibration``: a ``.npy`` file with N samples on its first axis, a folder of ``.npy`` files or images,
      or a numpy array of samples; ``method``: ``"minmax"``, ``"percentile:P"``, ``"mse"``; ``io_dtype``:
      ``"int8"`` or ``"float"``; ``eval``: samples to measure the error on; ``mean``/``std``: image
      preprocessing for image folders.
    - ``cloud-tpu``: StableHLO text (``output`` ending in ``.mlir``, or ``emit="mlir"``) or a TPU executable;
      ``topology`` (e.g. ``"v5e:2x2"``), ``dtype`` (``"f32"``, ``"bf16"``), ``replicas``, ``shard``, ``plugin``.
    - ``tflite``: a float TFLite model.

    Options of another target than ``target`` raise :class:`ModelError` (as the CLI refuses them, exit code 3); an invalid
    value raises :class:`InputError`. The GIL is
    released while compiling; Ctrl-C raises KeyboardInterrupt at once and stops the compile at its next step.
    """
    argv = [_os.fspath(path), "--target", target, "-o", _os.fspath(output)]
    temps = []

    def samples(x: Any) -> str:
        if isinstance(x, _np.ndarray):
            f = _tempfile.NamedTemporaryFile(prefix="tpu_sdk_samples_", suffix=".npy", delete=False)
            f.close()
            _np.save(f.name, x)
            temps.append(f.name)
            return f.name
        return _os.fspath(x)

    try:
        if calibration is not None:
            argv += ["--calibration", samples(calibration)]
        if eval is not None:
            argv += ["--eval", samples(eval)]
        # defaults are only passed for the target they belong to (the CLI refuses another target's flags)
        if method != "minmax":
            argv += ["--calibration-method", method]
        if io_dtype != "int8":
            argv += ["--io-dtype", io_dtype]
        if dtype != "f32":
            argv += ["--dtype", dtype]
        _flag(argv, "--topology", topology)
        _flag(argv, "--replicas", replicas)
        _flag(argv, "--emit", emit)
        _flag(argv, "--plugin", None if plugin is None else _os.fspath(plugin))
        _flag(argv, "--edgetpu-compiler", None if edgetpu_compiler is None else _os.fspath(edgetpu_compiler))
        for s in [shard] if isinstance(shard, str) else (shard or []):
            argv += ["--shard", s]
        for name, v in (input_shapes or {}).items():
            argv += ["--input-shape", f"{name}={','.join(str(int(d)) for d in v)}"]
        for flag, v in (("--mean", mean), ("--std", std)):
            if v is not None:
                argv += [flag, ",".join(str(float(x)) for x in _np.atleast_1d(v))]
        return _json.loads(_native.compile(argv))
    finally:
        for t in temps:
            try:
                _os.unlink(t)
            except OSError:
                pass


def inspect(path: PathLike, *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Dict[str, Any]:
    """The document ``tpu-sdk inspect MODEL --json`` prints: name, inputs, outputs (name, dtype, shape, layout,
    quantization), node and op counts, parameters, MACs and the graph's nodes."""
    shapes = None if input_shapes is None else {str(k): [int(d) for d in v] for k, v in input_shapes.items()}
    return _json.loads(_native.inspect(_os.fspath(path), shapes))


def devices(target: Optional[str] = None, *, plugin: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """The devices ``tpu-sdk devices --json`` lists (target, id, kind, state, location, details), of one target
    or of all. A target whose search failed raises :class:`DeviceError` when it was asked for by name, and is
    reported with a warning otherwise."""
    doc = _json.loads(_native.devices(target, None if plugin is None else _os.fspath(plugin)))
    for p in doc["problems"]:
        if target is not None:
            raise DeviceError(f"{p['target']}: {p['message']}")
        _warnings.warn(f"tpu_sdk.devices: {p['target']}: {p['message']}", RuntimeWarning, stacklevel=2)
    return doc["devices"]
