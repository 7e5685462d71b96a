"""msgpack with numpy arrays, in the openpi encoding: an array travels as a map with the keys
``__ndarray__``, ``data``, ``dtype``, ``shape``; a numpy scalar as ``__npgeneric__``, ``data``, ``dtype``.

Both ends of the socket decode frames they did not write, so decoding trusts nothing: an object dtype
would make numpy read the sender's bytes as pointers (a segfault). Only numbers of a bool / integer /
float / complex dtype, in a buffer of exactly the declared size, pass; the rest is a MalformedFrameError."""

from __future__ import annotations

import math
import re
from typing import Any

import msgpack
import numpy as np

from recovery.core.errors import RecoveryError

ALLOWED_KINDS = "biufc"  # bool, int, uint, float, complex: bytes that are values, never pointers
_NUMBER_DTYPE = re.compile(f"[<>|=]?[{ALLOWED_KINDS}][0-9]{{1,2}}")
_MAX_DIMS = 64  # numpy's limit; also bounds the work spent on a hostile shape


class MalformedFrameError(RecoveryError, ValueError):
    """A frame that is not msgpack, or an array / scalar in it that cannot be rebuilt safely."""


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in ALLOWED_KINDS:  # object / string arrays cannot be rebuilt safely
            raise TypeError(f"cannot send a numpy array of dtype {obj.dtype}")
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def _field(obj: dict, key: bytes, what: str) -> Any:
    if key not in obj:
        raise MalformedFrameError(f"{what} without {key.decode()!r}")
    return obj[key]


def _dtype(value: Any, what: str) -> np.dtype:
    """Only the form ``dtype.str`` gives a number type ('<f4', '|u1'): numpy's parser never sees
    anything else (structured, subarray or deprecated alias strings)."""
    if not isinstance(value, str) or not _NUMBER_DTYPE.fullmatch(value):
        raise MalformedFrameError(f"{what} dtype {value!r:.50} is not a bool / integer / float / complex type "
                                  f"such as '<f4'")
    try:
        return np.dtype(value)
    except TypeError as exc:  # a size numpy lacks: '<f3'
        raise MalformedFrameError(f"{what} has an unknown dtype {value!r}") from exc


def _array(obj: dict) -> np.ndarray:
    dtype = _dtype(_field(obj, b"dtype", "__ndarray__"), "__ndarray__")
    shape = _field(obj, b"shape", "__ndarray__")
    if not isinstance(shape, (list, tuple)) or len(shape) > _MAX_DIMS or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise MalformedFrameError(f"__ndarray__ shape must be a list of at most {_MAX_DIMS} non-negative ints, "
                                  f"got {shape!r:.200}")
    data = _field(obj, b"data", "__ndarray__")
    if not isinstance(data, bytes):
        raise MalformedFrameError(f"__ndarray__ data must be bytes, got {type(data).__name__}")
    expected = math.prod(shape) * dtype.itemsize  # Python ints: a huge shape cannot overflow
    if len(data) != expected:
        raise MalformedFrameError(f"__ndarray__ of shape {tuple(shape)!r:.200} and dtype {dtype.str} needs "
                                  f"{expected} bytes, got {len(data)}")
    try:
        return np.frombuffer(data, dtype=dtype).reshape(shape)  # a read-only view on the frame's bytes
    except ValueError as exc:  # an empty array with a dimension numpy cannot hold, such as (0, 2**63)
        raise MalformedFrameError(f"__ndarray__ shape {tuple(shape)!r:.200}: {exc}") from exc


def _scalar(obj: dict) -> np.generic:
    dtype = _dtype(_field(obj, b"dtype", "__npgeneric__"), "__npgeneric__")
    data = _field(obj, b"data", "__npgeneric__")
    if not isinstance(data, (bool, int, float)):
        raise MalformedFrameError(f"__npgeneric__ data must be a number, got {type(data).__name__}")
    try:
        with np.errstate(over="raise"):
            return dtype.type(data)
    except (OverflowError, ValueError, FloatingPointError) as exc:  # 300 as int8, NaN as int, 1e300 as float32
        raise MalformedFrameError(f"__npgeneric__ value {data!r} does not fit dtype {dtype.str}: {exc}") from exc


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        return _array(obj)
    if b"__npgeneric__" in obj:
        return _scalar(obj)
    return obj


def packb(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_encode)


def unpackb(data: bytes) -> Any:
    """Raises MalformedFrameError (a ValueError) on a malformed frame."""
    if not isinstance(data, bytes):  # a websocket text frame
        raise MalformedFrameError(f"expected a binary msgpack frame, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except MalformedFrameError:
        raise
    except ValueError as exc:  # msgpack's own errors (bad format, truncated, extra data) subclass it
        raise MalformedFrameError(f"malformed msgpack frame: {exc}") from exc
