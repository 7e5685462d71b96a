"""LIBERO simulation: task lookup, the LIBERO robot backend, the scripted expert."""

import recovery.core.float_paths  # noqa: F401  (first: pins the CPU-dependent float paths before numpy loads)

import os

# Headless rendering; must be set before mujoco / robosuite are first imported.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
