"""Shared fixtures. Tests drive the real LIBERO simulator; one backend per module keeps them fast."""

from __future__ import annotations

import pytest

from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task


@pytest.fixture(scope="module")
def object_backend():
    backend = LiberoBackend(resolve_task("libero_object", 0))
    yield backend
    backend.close()
