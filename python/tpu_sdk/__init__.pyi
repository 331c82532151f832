"""Type stubs of the tpu_sdk package (see python/README.md)."""

import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from tpu_sdk._errors import DeviceError as DeviceError
from tpu_sdk._errors import Error as Error
from tpu_sdk._errors import InputError as InputError
from tpu_sdk._errors import ModelError as ModelError

__version__: str

PathLike = Union[str, os.PathLike[str]]

class TensorInfo(NamedTuple):
    name: str
    dtype: np.dtype[Any]
    shape: Tuple[Optional[int], ...]
    quantization: Optional[Tuple[List[float], List[int], Optional[int]]] = ...

def targets() -> List[str]: ...

class Session:
    inputs: List[TensorInfo]
    outputs: List[TensorInfo]
    def __init__(
        self,
        path: PathLike,
        target: str = "cpu",
        *,
        threads: Optional[int] = None,
        input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
        plugin: Optional[PathLike] = None,
        device: Optional[Union[str, int]] = None,
    ) -> None: ...
    @property
    def target(self) -> str: ...
    @property
    def path(self) -> str: ...
    def input_array(self, name: str, shape: Optional[Sequence[int]] = None) -> np.ndarray: ...
    def run(self, feeds: Mapping[str, Any]) -> Dict[str, np.ndarray]: ...
    def bench(self, iterations: int = 50, *, warmup: int = 5, feeds: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]: ...

def compile(
    path: PathLike,
    target: str,
    output: PathLike,
    *,
    calibration: Union[None, PathLike, np.ndarray] = None,
    method: str = "minmax",
    io_dtype: str = "int8",
    topology: Optional[str] = None,
    dtype: str = "f32",
    replicas: Optional[int] = None,
    shard: Union[None, str, Sequence[str]] = None,
    emit: Optional[str] = None,
    plugin: Optional[PathLike] = None,
    eval: Union[None, PathLike, np.ndarray] = None,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    mean: Union[None, float, Sequence[float]] = None,
    std: Union[None, float, Sequence[float]] = None,
    edgetpu_compiler: Optional[PathLike] = None,
) -> Dict[str, Any]: ...
def inspect(path: PathLike, *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Dict[str, Any]: ...
def devices(target: Optional[str] = None, *, plugin: Optional[PathLike] = None) -> List[Dict[str, Any]]: ...
