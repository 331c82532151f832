"""pycoral.adapters.common: input size, input tensor views and output tensors of an interpreter."""

from typing import Any, Callable, Tuple

import numpy as np


def output_tensor(interpreter: Any, i: int) -> np.ndarray:
    """Output ``i`` (by output position) of the last invoke."""
    return interpreter.tensor(interpreter.get_output_details()[i]["index"])()


def input_details(interpreter: Any, key: str) -> Any:
    """Field ``key`` of input 0's details (``"shape"``, ``"dtype"``, ``"quantization_parameters"``...)."""
    return interpreter.get_input_details()[0][key]


def input_size(interpreter: Any) -> Tuple[int, int]:
    """Input 0's (width, height), from its NHWC shape."""
    _, height, width, _ = input_details(interpreter, "shape")
    return int(width), int(height)


def input_tensor(interpreter: Any) -> np.ndarray:
    """A writable view of input 0's first image, (height, width, channels)."""
    return interpreter.tensor(input_details(interpreter, "index"))()[0]


def set_input(interpreter: Any, data: Any) -> None:
    """Copies ``data`` (height, width, channels) into input 0."""
    input_tensor(interpreter)[:, :] = data


def set_resized_input(interpreter: Any, size: Tuple[int, int], resize: Callable[[Tuple[int, int]], Any]) -> Tuple[Any, Tuple[float, float]]:
    """Puts ``resize((w, h))`` — the image of ``size`` scaled to fit the input, aspect kept — at the input's top
    left and zeros elsewhere; returns the resized image and the scale as (scale, scale)."""
    width, height = input_size(interpreter)
    w, h = size
    scale = min(width / w, height / h)
    w, h = int(w * scale), int(h * scale)
    tensor = input_tensor(interpreter)
    tensor.fill(0)
    channels = tensor.shape[-1]
    result = resize((w, h))
    tensor[:h, :w] = np.reshape(result, (h, w, channels))
    return result, (scale, scale)
