"""``python -m tpu_sdk ...``: the ``tpu-sdk`` command line (same arguments, output and exit codes)."""

import signal
import sys

from tpu_sdk import _native


def main() -> int:
    # As for the binary: Ctrl-C ends the process, and a closed pipe (| head) ends it quietly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    return _native.cli_main(["tpu-sdk", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
