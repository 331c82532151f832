"""The exceptions of tpu_sdk. Each carries the message the ``tpu-sdk`` command line prints for the same error;
the class says which exit code the command line would give (2, 3, 4; 1 for ``Error`` itself)."""


class Error(Exception):
    """Any error of tpu_sdk: I/O, a failure while running (exit code 1 of the CLI). The others subclass it."""


class InputError(Error, ValueError):
    """Inputs that do not match the model (a wrong dtype or shape, a missing or unknown input name) or bad
    arguments (exit code 2). Also a ``ValueError``, as tflite_runtime raises for a wrong tensor."""


class ModelError(Error):
    """The model cannot be loaded: a malformed or corrupt file, something unsupported, or more memory than the
    budget (exit code 3)."""


class DeviceError(Error):
    """A device or accelerator runtime is missing or failed (exit code 4)."""
