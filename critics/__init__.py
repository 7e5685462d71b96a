"""Critics: execution-quality metrics (local, global) and value / temporal value-risk critics."""

import recovery.core.float_paths  # noqa: F401  (first: pins the CPU-dependent float paths before numpy loads)
