"""Which nodes a parameter file starts: the one source of truth for the launch file and `recovery ros up`.

The file is a plain ROS 2 parameter file. Its ``launch`` section lists the nodes as
``NODE_NAME:EXECUTABLE``; every listed node has its own section with its parameters::

    launch:
      ros__parameters:
        nodes: ["libero_arm:sim_arm", "recovery_supervisor:supervisor"]
    libero_arm:
      ros__parameters: {suite: libero_object, ...}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from recovery.core.errors import RecoveryError

LAUNCH_SECTION = "launch"
# executable (setup.cfg console script) -> module with its main()
EXECUTABLES = {
    "supervisor": "ros_nodes.supervisor_node",
    "sim_arm": "ros_nodes.sim_arm_node",
    "recorder": "ros_nodes.recorder_node",
}


class LaunchSpecError(RecoveryError, ValueError):
    """A parameter file whose node list cannot be started."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    executable: str

    @property
    def module(self) -> str:
        return EXECUTABLES[self.executable]


def read_launch_spec(path: str | Path) -> list[NodeSpec]:
    path = Path(path)
    if not path.is_file():
        raise LaunchSpecError(f"parameter file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    try:
        entries = data[LAUNCH_SECTION]["ros__parameters"]["nodes"]
    except (KeyError, TypeError) as exc:
        raise LaunchSpecError(f"{path}: no {LAUNCH_SECTION}.ros__parameters.nodes list") from exc
    specs = []
    for entry in entries:
        name, sep, executable = str(entry).partition(":")
        if not sep or not name:
            raise LaunchSpecError(f"{path}: node entry {entry!r} must be NODE_NAME:EXECUTABLE")
        if executable not in EXECUTABLES:
            raise LaunchSpecError(f"{path}: unknown executable {executable!r}; valid: {', '.join(EXECUTABLES)}")
        if name not in data:
            raise LaunchSpecError(f"{path}: node {name!r} has no parameter section")
        specs.append(NodeSpec(name, executable))
    if len({s.name for s in specs}) != len(specs):
        raise LaunchSpecError(f"{path}: node names must be unique")
    return specs
