"""The embedded policy behind the Policy interface."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from recovery.core.files import file_digest
from recovery.core.robot import Observation
from recovery.core.shipped import shipped
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput, config_from_options, resolve_device
from vla_wrappers.embedded.model import EMBEDDED, Checkpoint

SHIPPED = shipped("vla_wrappers.embedded", "checkpoints")


def shipped_checkpoints(folder: Path = SHIPPED) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.pt"))}


@dataclass(frozen=True)
class EmbeddedConfig:
    checkpoint: str = ""  # empty: the shipped checkpoint of the task's suite
    device: str = "auto"


class EmbeddedPolicy(Policy):
    """The shipped network of the task's suite (or ``checkpoint=PATH``), on state features."""

    kind, shipped, trained_by = EMBEDDED, SHIPPED, "train-policy"  # what its checkpoints hold, where the
    # shipped ones are, and the command that makes one

    def __init__(self, backend=None, config: EmbeddedConfig = EmbeddedConfig()):
        self.device = resolve_device(config.device)
        self._explicit = Path(config.checkpoint) if config.checkpoint else None
        self._suite = getattr(getattr(backend, "task", None), "suite", None)
        self._loaded: dict[Path, Checkpoint] = {}
        self._ckpt: Checkpoint | None = None
        self._task_id = 0
        torch.set_num_threads(1)  # small nets: more threads only add contention beside the simulator

    @classmethod
    def from_options(cls, backend, options: dict[str, str]) -> "EmbeddedPolicy":
        return cls(backend, config_from_options(EmbeddedConfig, options))

    def reset(self, instruction: str) -> None:
        self._ckpt = self._checkpoint_for(instruction)
        task_id = self._ckpt.layout.task_id(instruction)
        if task_id is None:
            raise PolicyConfigError(
                f"the {self._ckpt.suite} checkpoint was not trained on {instruction!r}; it knows: "
                + "; ".join(self._ckpt.layout.instructions)
            )
        self._task_id = task_id

    @torch.no_grad()
    def infer(self, obs: Observation) -> PolicyOutput:
        if self._ckpt is None:
            raise RuntimeError("reset(instruction) must come before infer")
        chunk = self._ckpt.net(torch.from_numpy(self.features(obs)).to(self.device)[None])[0]
        return PolicyOutput(chunk.cpu().numpy().astype(np.float64))

    def features(self, obs: Observation) -> np.ndarray:
        return self._ckpt.layout.featurize_obs(obs, self._task_id)

    def weights_digest(self) -> str | None:
        """The checkpoint's digest: ``checkpoint=PATH``, else the shipped one of the backend's suite."""
        path = self._explicit or shipped_checkpoints(self.shipped).get(self._suite)
        return file_digest(path) if path and path.exists() else None

    def _checkpoint_for(self, instruction: str) -> Checkpoint:
        if self._explicit:
            return self._load(self._explicit)
        shipped = shipped_checkpoints(self.shipped)
        if self._suite in shipped:
            return self._load(shipped[self._suite])
        for path in shipped.values():  # no backend (e.g. behind serve-policy): find by instruction
            if self._load(path).layout.task_id(instruction) is not None:
                return self._load(path)
        raise PolicyConfigError(
            f"no shipped {self.kind.replace('-', ' ')} checkpoint for suite {self._suite!r} / {instruction!r} (shipped: "
            f"{', '.join(shipped) or 'none'}); train one with `recovery {self.trained_by}` and pass checkpoint=PATH"
        )

    def _load(self, path: Path) -> Checkpoint:
        if path not in self._loaded:
            if not path.exists():
                raise PolicyConfigError(f"checkpoint {path} does not exist")
            self._loaded[path] = Checkpoint.load(path, self.device, self.kind)
        return self._loaded[path]
