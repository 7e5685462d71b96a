"""The network (an MLP from features to an action chunk) and its checkpoint format."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from recovery.core.features import FeatureLayout
from recovery.core.files import written_atomically
from vla_wrappers.base import PolicyConfigError

CHECKPOINT_VERSION = 1
EMBEDDED = "embedded-policy"  # the kinds of network this format holds: a base policy ...
REPAIR = "repair-policy"  # ... or a repair policy (vla_wrappers.repair), whose input adds the repair target


@dataclass(frozen=True)
class NetConfig:
    horizon: int = 8  # actions per chunk (the broker executes the first 5, then re-plans)
    hidden: int = 512
    layers: int = 3


class ChunkMLP(nn.Module):
    """Normalised features -> (horizon, 7) actions in [-1, 1]."""

    def __init__(self, in_size: int, config: NetConfig):
        super().__init__()
        self.config = config
        dims = [in_size] + [config.hidden] * config.layers
        blocks: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            blocks += [nn.Linear(a, b), nn.GELU()]
        self.body = nn.Sequential(*blocks, nn.Linear(dims[-1], config.horizon * 7))
        self.register_buffer("feat_mean", torch.zeros(in_size))
        self.register_buffer("feat_std", torch.ones(in_size))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = (features - self.feat_mean) / self.feat_std
        return torch.tanh(self.body(x)).view(-1, self.config.horizon, 7)


@dataclass(frozen=True)
class Checkpoint:
    layout: FeatureLayout  # the object slots and tasks (a repair network's input extends these features)
    net: ChunkMLP
    suite: str
    training: dict  # how it was made: command, seed, epochs, minutes, demos
    kind: str = EMBEDDED

    def save(self, path: Path) -> None:
        with written_atomically(path) as tmp:  # an interrupted save never leaves half a checkpoint
            torch.save({
                "format": _format(self.kind), "version": CHECKPOINT_VERSION, "suite": self.suite,
                "object_names": list(self.layout.object_names), "instructions": list(self.layout.instructions),
                "task_objects": [list(objects) for objects in self.layout.task_objects],
                "net": asdict(self.net.config), "state_dict": self.net.state_dict(), "training": self.training,
            }, tmp)

    @classmethod
    def load(cls, path: Path, device: str = "cpu", kind: str = EMBEDDED) -> "Checkpoint":
        try:
            raw = torch.load(path, map_location=device, weights_only=True)
        except Exception as exc:
            raise PolicyConfigError(f"{path} is not a readable checkpoint: {exc}") from exc
        if raw.get("format") != _format(kind) or raw.get("version") != CHECKPOINT_VERSION:
            raise PolicyConfigError(
                f"{path}: checkpoint format {raw.get('format')!r} v{raw.get('version')}; expected "
                f"{_format(kind)!r} v{CHECKPOINT_VERSION}"
            )
        layout = FeatureLayout(tuple(raw["object_names"]), tuple(raw["instructions"]),
                               tuple(tuple(objects) for objects in raw.get("task_objects", ())))
        net = ChunkMLP(len(raw["state_dict"]["feat_mean"]), NetConfig(**raw["net"]))
        net.load_state_dict(raw["state_dict"])
        return cls(layout, net.to(device).eval(), raw["suite"], raw["training"], kind)


def _format(kind: str) -> str:
    return f"agentic-recovery/{kind}"
