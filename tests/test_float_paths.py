"""The CPU-dependent float paths are pinned before numpy loads, and a user's own setting wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from recovery.core.float_paths import PINNED

SHOW = "import json, os, {first}; from recovery.core import float_paths; " \
       "print(json.dumps([{{k: os.environ[k] for k in float_paths.PINNED}}, float_paths.unpinned()]))"


def _run(first: str, env: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    clean = {k: v for k, v in os.environ.items() if k not in PINNED}
    out = subprocess.run([sys.executable, "-c", SHOW.format(first=first)], env={**clean, **(env or {})},
                         capture_output=True, text=True, check=True).stdout
    return tuple(json.loads(out))


def test_importing_any_package_of_the_stack_pins_the_paths_first():
    for package in ("recovery", "sim", "critics", "vla_wrappers"):
        settings, problems = _run(package)
        assert settings == PINNED and problems == [], package


def test_a_users_setting_wins_and_is_reported():
    settings, problems = _run("recovery", {"OPENBLAS_CORETYPE": "Haswell"})
    assert settings["OPENBLAS_CORETYPE"] == "Haswell"
    assert problems == ["OPENBLAS_CORETYPE=Haswell (pinned: Prescott)"]


def test_numpy_loaded_before_the_stack_is_reported():
    _, problems = _run("numpy")
    assert problems == ["numpy was imported before recovery"]


def test_torchs_gelu_runs_on_avx2_kernels_at_most():
    """oneDNN JIT-compiles the embedded policy's GELU for the CPU it finds: an AVX-512 kernel rounds
    otherwise than the AVX2 one, and an episode on an Intel Xeon left the one an AMD EPYC published."""
    gelu = ("import recovery, torch; torch.set_num_threads(1); "
            "torch.nn.GELU()(torch.linspace(-3, 3, 100)[None])")
    clean = {k: v for k, v in os.environ.items() if k not in PINNED}
    log = subprocess.run([sys.executable, "-c", gelu], env={**clean, "ONEDNN_VERBOSE": "1"}, capture_output=True,
                         text=True, check=True).stdout
    # onednn_verbose,v1,primitive,exec,ENGINE,PRIMITIVE,IMPLEMENTATION,...: e.g. jit:avx2 or jit:avx512_core
    kernels = [line.split(",")[6] for line in log.splitlines() if line.startswith("onednn_verbose,v1,primitive,exec,")]
    assert kernels, "torch no longer runs GELU through oneDNN: check what float path replaced it"
    assert not any("512" in kernel for kernel in kernels), kernels
