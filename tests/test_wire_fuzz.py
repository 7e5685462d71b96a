"""Frames from a hostile or broken peer: the openpi decoder either rebuilds plain numbers or raises
MalformedFrameError; never another exception, never a crash (an object dtype used to segfault)."""

from __future__ import annotations

import math

import msgpack
import numpy as np
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from vla_wrappers.openpi import msgpack_numpy
from vla_wrappers.openpi.msgpack_numpy import ALLOWED_KINDS, MalformedFrameError

FUZZ = settings(max_examples=300, deadline=None, database=None)

MSGPACK_INTS = st.integers(-2**63, 2**64 - 1)
GOOD_DTYPES = ["|b1", "|u1", "|i1", "<i2", "<u4", ">i8", "<f2", "<f4", "f8", ">f8", "<c8", "<c16"]
FOREIGN_DTYPES = ["|O", "<U5", "V8", "|S3", "<M8[s]", "<m8[ns]", "(2,)<f8", "<f8,<i4"]  # numpy's, refused
GARBAGE_DTYPES = ["i0", "<f3", "a", "float32", "", "garbage"]
DTYPES = st.one_of(st.sampled_from(GOOD_DTYPES + FOREIGN_DTYPES + GARBAGE_DTYPES), st.text(max_size=8),
                   st.binary(max_size=4), MSGPACK_INTS, st.none())
DIMS = st.one_of(st.integers(0, 4), st.integers(-3, -1), st.integers(2**31, 2**64 - 1), st.floats(),
                 st.text(max_size=2), st.booleans(), st.none())
SHAPES = st.one_of(st.lists(DIMS, max_size=4), st.lists(st.just(1), min_size=60, max_size=70), MSGPACK_INTS,
                   st.text(max_size=3), st.none())
VALUES = st.one_of(st.booleans(), MSGPACK_INTS, st.floats(), st.text(max_size=4), st.binary(max_size=8),
                   st.none(), st.lists(st.integers(0, 9), max_size=2))


@st.composite
def ndarray_frames(draw) -> dict:
    if draw(st.booleans()):  # plausible: a numpy dtype, a small shape, a buffer of the right size or one off
        dtype = draw(st.sampled_from(GOOD_DTYPES + FOREIGN_DTYPES))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        n = math.prod(shape) * np.dtype(dtype).itemsize
        data = draw(st.sampled_from([n, n, max(n - 1, 0), n + 1]).flatmap(
            lambda size: st.binary(min_size=size, max_size=size)))
    else:
        dtype, shape, data = draw(DTYPES), draw(SHAPES), draw(st.one_of(st.binary(max_size=64), VALUES))
    frame = {b"__ndarray__": True, b"dtype": dtype, b"shape": shape, b"data": data}
    for key in draw(st.sets(st.sampled_from([b"dtype", b"shape", b"data"]), max_size=1)):
        del frame[key]
    return frame


def _unpack(frame: dict, nested: bool):
    """The decoded frame, or None where the decoder refused it, as the contract allows."""
    packed = msgpack.packb({"actions": frame} if nested else frame)
    try:
        value = msgpack_numpy.unpackb(packed)
    except MalformedFrameError:
        event("refused")
        return None
    event("decoded")
    return value["actions"] if nested else value


@FUZZ
@given(st.binary(max_size=256))
def test_arbitrary_bytes(data):
    try:
        msgpack_numpy.unpackb(data)
    except MalformedFrameError:
        pass


@FUZZ
@given(ndarray_frames(), st.booleans())
@example({b"__ndarray__": True, b"dtype": "|O", b"shape": [8], b"data": b"\x41" * 64}, False)
@example({b"__ndarray__": True, b"dtype": "<U5", b"shape": [1], b"data": b"\x41" * 20}, False)
@example({b"__ndarray__": True, b"dtype": "V8", b"shape": [2], b"data": b"\x41" * 16}, False)
@example({b"__ndarray__": True, b"dtype": "<f8", b"shape": [10**12], b"data": b"\0" * 8}, False)
@example({b"__ndarray__": True, b"dtype": "<f8", b"shape": [0, 2**63], b"data": b""}, False)
@example({b"__ndarray__": True, b"dtype": "<f8", b"shape": [-1], b"data": b"\0" * 8}, True)
@example({b"__ndarray__": True, b"dtype": "<f8", b"shape": [1.0], b"data": b"\0" * 8}, True)
@example({b"__ndarray__": True, b"dtype": "|u1", b"shape": [1] * 65, b"data": b"\0"}, False)
def test_ndarray_frames(frame, nested):
    value = _unpack(frame, nested)
    if value is not None:
        assert isinstance(value, np.ndarray) and value.dtype.kind in ALLOWED_KINDS
        assert value.dtype == np.dtype(frame[b"dtype"]) and value.shape == tuple(frame[b"shape"])
        assert value.nbytes == len(frame[b"data"]) and value.tobytes() == frame[b"data"]


@FUZZ
@given(st.one_of(st.tuples(st.sampled_from(GOOD_DTYPES), st.one_of(st.booleans(), MSGPACK_INTS, st.floats())),
                 st.tuples(DTYPES, VALUES)), st.booleans())
@example(("|O", 2**40), False)
@example(("|i1", 300), False)
@example(("<i8", float("nan")), True)
@example(("<f4", 1e300), False)
def test_npgeneric_frames(dtype_and_data, nested):
    dtype, data = dtype_and_data
    value = _unpack({b"__npgeneric__": True, b"dtype": dtype, b"data": data}, nested)
    if value is not None:
        assert isinstance(value, np.generic) and value.dtype.kind in ALLOWED_KINDS
        assert value.dtype.type is np.dtype(dtype).type  # a scalar is always in native byte order


@FUZZ
@given(st.data())
def test_corrupted_valid_frames(data):
    """Valid requests with a few bytes overwritten or cut: the damage lands inside the structure."""
    packed = bytearray(msgpack_numpy.packb(
        {"observation/state": np.arange(8, dtype=np.float32), "n": np.int64(3), "prompt": "pick"}))
    for _ in range(data.draw(st.integers(1, 3))):
        packed[data.draw(st.integers(0, len(packed) - 1))] = data.draw(st.integers(0, 255))
    packed = packed[:data.draw(st.integers(0, len(packed)))]
    try:
        msgpack_numpy.unpackb(bytes(packed))
    except MalformedFrameError:
        pass
