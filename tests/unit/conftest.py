"""Unit-test fixtures: ``record_decoder`` runs a record suite once per decoder (Rust and Python).

A module opts in with ``pytestmark = pytest.mark.usefixtures("record_decoder")``; tests/decoders.py
says when the native case is skipped and when it fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aiokafka_lite.protocol.native import DecoderName
from tests.decoders import decoder_in_use


@pytest.fixture(scope="module", params=["python", "native"])
def record_decoder(request: pytest.FixtureRequest) -> Iterator[DecoderName]:
    """The record decoder under test, switched on for the module's tests and restored afterwards."""
    with decoder_in_use(request.param) as name:
        yield name
