"""Shared fixtures. Tests drive the real LIBERO simulator; one backend per module keeps them fast.

The tests check episodes and features to the bit on the pinned float paths
(``recovery.core.float_paths``), so they pin them over a machine's own setting (some machines set
OPENBLAS_CORETYPE for every process), before numpy loads: in the test process and the workers it starts.
"""

from __future__ import annotations

import os

from recovery.core.float_paths import PINNED

os.environ.update(PINNED)

import pytest  # noqa: E402

from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task


@pytest.fixture(scope="module")
def object_backend():
    backend = LiberoBackend(resolve_task("libero_object", 0))
    yield backend
    backend.close()
