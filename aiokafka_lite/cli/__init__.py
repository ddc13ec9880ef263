"""The `aiokafka-lite` command: consume, group inspection, the demo."""

from .main import main

__all__ = ["main"]
