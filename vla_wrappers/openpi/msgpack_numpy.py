"""msgpack with numpy arrays, in the openpi encoding: an array travels as a map with the keys
``__ndarray__``, ``data``, ``dtype``, ``shape``; a numpy scalar as ``__npgeneric__``, ``data``, ``dtype``."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufc":  # object / string arrays cannot be rebuilt safely
            raise TypeError(f"cannot send a numpy array of dtype {obj.dtype}")
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_encode)


def unpackb(data: bytes) -> Any:
    """Raises ValueError (msgpack's errors subclass it) on a malformed frame."""
    return msgpack.unpackb(data, object_hook=_decode)
