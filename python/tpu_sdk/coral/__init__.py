"""pycoral-compatible layer: the pycoral names people's scripts use, over tpu_sdk's runtimes.

Change ``from pycoral.adapters import classify`` to ``from tpu_sdk.coral.adapters import classify`` (and so on
for ``common``, ``detect``, ``utils.edgetpu``, ``utils.dataset``); ``import tflite_runtime.interpreter as
tflite`` becomes ``from tpu_sdk.coral import interpreter as tflite``. Models run on the Edge TPU when one is
present (and the model is compiled for it), otherwise on tpu_sdk's CPU runtime: no TensorFlow, tflite_runtime or
libedgetpu version to match.
"""

from tpu_sdk.coral.interpreter import Interpreter, load_delegate

__all__ = ["Interpreter", "load_delegate", "adapters", "utils"]
