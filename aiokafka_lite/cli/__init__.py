"""The `aiokafka-lite` command: consume, group inspection, the demo."""

from .._interrupted_import import exit_quietly_if_interrupted

with exit_quietly_if_interrupted():  # Ctrl-C while the command starts: exit 130, no traceback
    from .main import main

__all__ = ["main"]
