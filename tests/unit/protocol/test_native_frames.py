"""The native frame buffer (_native.FrameBuffer) and view_in_bytes, which let a response be received
into, and decoded from, one bytes object."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.protocol import native

if not native.available():
    pytest.skip(f"no native extension: {native.why_python()}", allow_module_level=True)



def module() -> Any:
    from aiokafka_lite import _native as built  # type: ignore[attr-defined]
    return built


def test_a_frame_buffer_is_filled_through_a_view_and_taken_once_as_bytes() -> None:
    buffer = module().FrameBuffer(10)
    view = memoryview(buffer)
    assert not view.readonly
    assert len(view) == len(buffer) == 10
    view[:5] = b"01234"
    view[5:] = b"56789"
    view.release()
    frame = buffer.take()
    assert type(frame) is bytes
    assert frame == b"0123456789"
    with pytest.raises(BufferError, match="taken already"):
        buffer.take()
    with pytest.raises(BufferError, match="taken already"):
        memoryview(buffer)


def test_a_view_kept_past_take_keeps_the_bytes_alive() -> None:
    buffer = module().FrameBuffer(4)
    view = memoryview(buffer)[1:]
    view[:] = b"abc"
    frame = buffer.take()
    del buffer
    assert bytes(view) == b"abc"
    assert frame[1:] == b"abc"


@pytest.mark.parametrize("size", [-1, 1 << 62])
def test_an_impossible_size_is_refused(size: int) -> None:
    with pytest.raises((OverflowError, ValueError, MemoryError)):
        module().FrameBuffer(size)


def test_view_in_bytes_finds_the_frame_and_offset_of_a_view() -> None:
    frame = bytes(range(200))
    found = module().view_in_bytes(memoryview(frame)[17:90])
    assert found is not None
    assert found[0] is frame
    assert found[1] == 17
    assert module().view_in_bytes(memoryview(frame)[200:])[1] == 200


@pytest.mark.parametrize("view", [memoryview(bytearray(8))[2:], memoryview(bytes(10))[::2], b"not a view"])
def test_view_in_bytes_says_none_when_the_view_is_not_a_plain_slice_of_bytes(view: Any) -> None:
    assert module().view_in_bytes(view) is None
