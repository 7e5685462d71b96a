"""Pin the floating-point code paths that would otherwise follow the CPU, so that an episode is
bit-identical on every x86-64 machine, not only on machines of the same model.

Three libraries pick their kernels from the processor they find at load time, and their kernels
round differently:
- MKL, behind torch's matrix products (the embedded policy, the critics' training);
- OpenBLAS, behind numpy's linear algebra (robosuite's operational-space controller inverts the
  mass matrix every control step);
- oneDNN, behind torch's ``nn.GELU`` (the embedded policy's activation), which it JIT-compiles for
  the widest vector unit it finds; MKL's setting does not reach it.
Forcing MKL or OpenBLAS onto another of its kernels changes the first libero_spatial episode of
the embedded policy within 120 steps (measured on an AMD EPYC). oneDNN was found when episodes
published from an AMD EPYC, with the first two pinned, did not reproduce on an Intel Xeon (19 of 72
libero_spatial episodes of the policy alone differed, reports/float_paths.md): there it ran AVX-512 kernels, on the EPYC
AVX2; capped at AVX2, the Xeon gives the EPYC's episodes again. numpy's AVX-512 kernels (its
transcendental functions among them) and torch's own vectorised kernels (elementwise tanh) are
pinned too; turning numpy's AVX2 kernels off or torch's on changed nothing.

The settings must be in the environment before numpy and torch load those libraries: every
top-level package of the stack imports this module first (``recovery``, ``sim``, ``critics``,
``vla_wrappers``, ``ros_nodes``), and worker processes inherit the environment. A variable the
user has set is left alone. Boundary: x86-64 with AVX2 (every Intel CPU since 2013's Haswell,
every AMD Zen); an older CPU, or an Arm one, runs other kernels.
"""

from __future__ import annotations

import os
import sys

PINNED = {
    "MKL_CBWR": "COMPATIBLE",  # MKL's conditional numerical reproducibility: one code path on every x86-64 CPU
    "OPENBLAS_CORETYPE": "Prescott",  # OpenBLAS's baseline x86-64 kernels (SSE3) instead of the CPU's own
    "ATEN_CPU_CAPABILITY": "default",  # torch's unvectorised CPU kernels
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy: AVX2 kernels at most
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (torch's GELU): AVX2 kernels at most
}

_EARLY = [module for module in ("numpy", "torch") if module in sys.modules]  # loaded before the pins
for _name, _value in PINNED.items():
    os.environ.setdefault(_name, _value)


def unpinned() -> list[str]:
    """What cannot be trusted to be pinned in this process: variables set to other values, and
    libraries loaded before this module ran (their kernels were chosen already)."""
    problems = [f"{name}={os.environ[name]} (pinned: {value})" for name, value in PINNED.items()
                if os.environ[name] != value]
    return problems + [f"{module} was imported before recovery" for module in _EARLY]
