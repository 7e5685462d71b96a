"""Node settings as dataclasses, filled from the ROS parameters of one YAML file.

ROS flattens nested YAML maps into dotted parameter names (``robot.limits.max_velocity``);
``from_params`` nests them back and builds the dataclass, so that a misspelt key is an error
instead of a silently ignored setting. (rcl cannot parse an empty list: leave such keys out.)
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from recovery.core.errors import RecoveryError
from recovery.core.protocol import max_steps_for
from recovery.supervision.config import SupervisorConfig

PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
# ROS declares these on every node; they are not ours to configure
ROS_RESERVED = frozenset({"use_sim_time", "start_type_description_service"})


class ConfigError(RecoveryError, ValueError):
    """A parameter file that does not fit the node's settings (unknown key, wrong type, bad value)."""


@dataclass(frozen=True)
class JointLimits:
    """Position, velocity and acceleration limits per arm joint. Defaults: Franka Panda positions,
    velocities and accelerations scaled down for rollback moves near objects."""

    lower: tuple[float, ...] = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
    upper: tuple[float, ...] = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
    max_velocity: tuple[float, ...] = (1.0,) * 7  # rad/s (Panda: 2.175-2.61)
    max_acceleration: tuple[float, ...] = (2.0,) * 7  # rad/s^2 (Panda: 7.5-20)

    def check(self, dof: int) -> None:
        for name in ("lower", "upper", "max_velocity", "max_acceleration"):
            if len(getattr(self, name)) != dof:
                raise ConfigError(f"limits.{name} has {len(getattr(self, name))} values for {dof} joints")
        if any(lo >= hi for lo, hi in zip(self.lower, self.upper)):
            raise ConfigError("limits.lower must be below limits.upper for every joint")
        if min(self.max_velocity) <= 0 or min(self.max_acceleration) <= 0:
            raise ConfigError("limits.max_velocity and limits.max_acceleration must be positive")


@dataclass(frozen=True)
class ArmTopics:
    """The topics of an arm driver (names as ros2_control, MoveIt Servo and franka_ros2 use them)."""

    joint_states: str = "/joint_states"  # sensor_msgs/JointState: arm and finger joints
    eef_pose: str = "/eef_pose"  # geometry_msgs/PoseStamped: grip point position, hand orientation
    wrench: str = "/external_wrench"  # geometry_msgs/WrenchStamped: contact force on the arm ("" = none)
    twist_command: str = "/servo/delta_twist_cmds"  # geometry_msgs/TwistStamped
    gripper_command: str = "/gripper/command"  # std_msgs/Float64: -1 open, +1 close, 0 keep
    trajectory: str = "/arm_controller/joint_trajectory"  # trajectory_msgs/JointTrajectory
    trajectory_action: str = "/arm_controller/follow_joint_trajectory"  # control_msgs, when present
    emergency_stop: str = "/emergency_stop"  # std_msgs/Bool, latched: True stops the arm
    success: str = "/task_success"  # std_msgs/Bool: the simulator's oracle or a detector ("" = none)
    objects: str = "/objects"  # OBJECTS/NAME/pose geometry_msgs/PoseStamped, for state-based policies


@dataclass(frozen=True)
class JointConfig:
    names: tuple[str, ...] = PANDA_JOINTS
    finger_names: tuple[str, ...] = PANDA_FINGERS
    limits: JointLimits = field(default_factory=JointLimits)

    def __post_init__(self) -> None:
        if not self.names:
            raise ConfigError("joints.names is empty")
        if len(set(self.names + self.finger_names)) != len(self.names) + len(self.finger_names):
            raise ConfigError("joint names must be unique")
        self.limits.check(len(self.names))


@dataclass(frozen=True)
class RobotConfig:
    """How the supervisor's backend talks to the arm."""

    joints: JointConfig = field(default_factory=JointConfig)
    topics: ArmTopics = field(default_factory=ArmTopics)
    frame_id: str = "world"  # frame of commands and poses
    control_rate_hz: float = 20.0  # one policy action per period (LIBERO: 20 Hz)
    max_state_age_s: float = 0.25  # older joint states (or any other input) are never acted on
    object_names: tuple[str, ...] = ()  # object poses the policy reads (state-based policies)
    cameras: dict[str, str] = field(default_factory=dict)  # observation key -> sensor_msgs/Image topic
    trajectory_interface: str = "topic"  # topic | action (FollowJointTrajectory; needs control_msgs)
    trajectory_dt: float = 0.05  # s between trajectory points
    max_rollback_joint_step: float = 1.5  # rad: a rollback moving any joint further is refused

    def __post_init__(self) -> None:
        if self.trajectory_interface not in ("topic", "action"):
            raise ConfigError(f"trajectory_interface must be topic or action, got {self.trajectory_interface!r}")
        if self.control_rate_hz <= 0 or self.max_state_age_s <= 0 or self.trajectory_dt <= 0:
            raise ConfigError("control_rate_hz, max_state_age_s and trajectory_dt must be positive")

    @property
    def period(self) -> float:
        return 1.0 / self.control_rate_hz


@dataclass(frozen=True)
class SupervisorNodeConfig:
    """The recovery supervisor node: base policy, supervisor (metrics, critics, selector), robot."""

    suite: str = "libero_object"  # where the reference trajectories and the critic come from
    # the task whose reference trajectories (and, for a LIBERO task, instruction) the supervisor uses
    task: str = "pick_up_the_alphabet_soup_and_place_it_in_the_basket"
    instruction: str = ""  # "" = the task name in words; `~/instruction` (std_msgs/String) overrides
    policy: str = "embedded"  # a registered policy (embedded, openpi, ...) or module:Class
    policy_options: dict[str, str] = field(default_factory=dict)  # e.g. openpi: host, port, timeout_s
    replan_every: int = 5
    selector: str = "rule"  # rule | none | ppo
    repair: str = "rollback"  # policy: a repair policy puts the world back (needs object poses in the inputs)
    repair_policy: str = "repair"  # the learned one (none ships: give it checkpoint=PATH), or module:Class
    repair_policy_options: dict[str, str] = field(default_factory=dict)
    max_rollbacks: int = SupervisorConfig.max_rollbacks
    max_steps: int = 0  # control steps per episode, rollback motion included; 0: the suite's standard budget

    @property
    def episode_steps(self) -> int:
        return self.max_steps or max_steps_for(self.suite)

    @property
    def task_instruction(self) -> str:
        return self.instruction or self.task.replace("_", " ")
    scene_reset_service: str = ""  # std_srvs/Trigger called before each episode ("" = none: a person resets)
    robot: RobotConfig = field(default_factory=RobotConfig)


@dataclass(frozen=True)
class DisturbanceParams:
    name: str = "none"  # none | action_noise | object_push | gripper_open | obs_noise | action_jitter
    onset_min: int = 10
    onset_max: int = 80
    duration: int = 5
    magnitude: float = 3.0


@dataclass(frozen=True)
class SimArmConfig:
    """The simulated arm: a LIBERO scene behind the topics of a real arm driver."""

    suite: str = "libero_object"
    task: int = 0
    init_index: int = 0  # the scene `~/reset` restores
    seed: int = 7
    rate_hz: float = 20.0  # physics steps per second (one LIBERO control step each)
    command_timeout_s: float = 0.15  # an older twist command is not executed: the arm holds
    goal_pos_tol: float = 0.005  # m: a trajectory has succeeded once the grip point is this close
    goal_rot_tol: float = 0.05  # rad
    goal_time_tol_s: float = 1.0  # settling time allowed after the trajectory's last point
    joints: JointConfig = field(default_factory=JointConfig)
    topics: ArmTopics = field(default_factory=ArmTopics)
    frame_id: str = "world"
    disturbance: DisturbanceParams = field(default_factory=DisturbanceParams)


@dataclass(frozen=True)
class RecorderConfig:
    """Episode bags: one MCAP bag per episode, opened and closed by the supervisor's events."""

    out_dir: str = "bags"
    events_topic: str = "/recovery_supervisor/events"
    topics: tuple[str, ...] = ()  # "TOPIC:package/msg/Type" each


T = TypeVar("T")


def from_params(cls: type[T], params: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from flat ROS parameters (dotted names); unknown keys are errors."""
    params = {k: v for k, v in params.items() if k not in ROS_RESERVED}
    return _build(cls, _nest(params), prefix)


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _build(cls: type[T], tree: dict[str, Any], prefix: str) -> T:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(tree) - names)
    if unknown:
        raise ConfigError(f"unknown parameter(s) {[prefix + u for u in unknown]}; valid: {sorted(names)}")
    values = {name: _convert(hints[name], value, prefix + name) for name, value in tree.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{prefix or cls.__name__}: {exc}") from exc


def _convert(hint: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a map of settings, got {value!r}")
        return _build(hint, value, name + ".")
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a map, got {value!r}")
        return {k: str(v) for k, v in value.items()}
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list, got {value!r}")
        return tuple(_convert(item, v, name) for v in value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{name} must be {getattr(hint, '__name__', hint)}, got {value!r}")
    return value
