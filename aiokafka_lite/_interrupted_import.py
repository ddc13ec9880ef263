"""Ctrl-C while the `aiokafka-lite` command is still importing the package (a second or so on a busy
machine, before any command's own signal handling): exit 130, as after startup, instead of Python's
KeyboardInterrupt traceback. Only when this process is the command: a program importing the library
gets its KeyboardInterrupt as usual."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
from collections.abc import Iterator

EXIT_SIGINT = 128 + signal.SIGINT  # as the command exits after SIGINT (cli/run.py, cli/main.py)


def running_as_the_command() -> bool:
    """Whether this process is `aiokafka-lite` (the console script) or `python -m aiokafka_lite`."""
    if os.path.basename(sys.argv[0] if sys.argv else "").startswith("aiokafka-lite"):
        return True
    # While `python -m` imports the package, sys.argv[0] is "-m": the original command line says which.
    return any(flag == "-m" and module == "aiokafka_lite" for flag, module in itertools.pairwise(sys.orig_argv))


@contextlib.contextmanager
def exit_quietly_if_interrupted() -> Iterator[None]:
    """Around the package's imports: KeyboardInterrupt inside is SystemExit(130) for the command."""
    try:
        yield
    except KeyboardInterrupt:
        if not running_as_the_command():
            raise
        raise SystemExit(EXIT_SIGINT) from None
