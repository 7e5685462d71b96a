"""Numpy forward pass of the critics' small torch MLPs, for the per-step path.

The supervisor evaluates one state per step; at that size torch's per-op dispatch costs about
ten times the arithmetic (~0.2 ms against ~0.02 ms a call), so inference runs the same float32
weights in numpy. Training stays in torch; the two agree to float32 rounding (tests).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf  # scipy comes with robosuite
from torch import nn

SQRT_HALF = np.float32(np.sqrt(0.5))


class NumpyMLP:
    """A frozen copy of an ``nn.Sequential`` of ``Linear`` and exact ``GELU`` layers."""

    def __init__(self, body: nn.Sequential):
        self._layers: list[tuple[np.ndarray, np.ndarray] | None] = []  # None: a GELU
        for module in body:
            if isinstance(module, nn.Linear):
                self._layers.append((module.weight.detach().numpy().copy(), module.bias.detach().numpy().copy()))
            elif isinstance(module, nn.GELU) and module.approximate == "none":
                self._layers.append(None)
            else:
                raise TypeError(f"NumpyMLP has no numpy version of {module}")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x``: (..., in) float32 -> (..., out) float32."""
        for layer in self._layers:
            if layer is None:
                x = 0.5 * x * (1.0 + erf(x * SQRT_HALF))  # torch's exact GELU
            else:
                weight, bias = layer
                x = x @ weight.T + bias
        return x
