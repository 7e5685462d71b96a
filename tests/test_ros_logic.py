"""The ROS layer's plain-Python parts: configuration, launch spec, conversions, joint mapping,
staleness, trajectory timing and limit checks, episode bags. No rclpy needed."""

from __future__ import annotations

import numpy as np
import pytest

from recovery.core.protocol import max_steps_for
from recovery.supervision.config import SHIPPED_REFERENCES
from ros_nodes.config import (
    ConfigError, JointConfig, JointLimits, RecorderConfig, RobotConfig, SimArmConfig, SupervisorNodeConfig, from_params,
)
from ros_nodes.convert import (
    action_to_twist, image_to_rgb, quat_to_axis_angle, rgb_to_image_fields, standard_state, twist_to_action,
)
from ros_nodes.launch_spec import LaunchSpecError, read_launch_spec
from ros_nodes.state import ArmStateCache, InputError, JointMapper, StaleStateError, check_finite
from ros_nodes.trajectory import JointPath, TrajectoryLimitError, check_trajectory, plan_joint_move, sample

LIMITS = JointLimits()
START = np.array([0.0, -0.13, 0.0, -2.46, 0.0, 2.23, 0.78])


# --- configuration ------------------------------------------------------------------------------------
def test_params_nest_into_dataclasses():
    config = from_params(SupervisorNodeConfig, {
        "policy": "openpi", "policy_options.host": "10.0.0.2", "policy_options.port": 8000,
        "robot.max_state_age_s": 1, "robot.joints.limits.max_velocity": [0.5] * 7,
        "robot.topics.joint_states": "/arm/joint_states", "robot.object_names": ["a", "b"],
        "use_sim_time": False,  # declared by ROS on every node: ignored
    })
    assert config.policy_options == {"host": "10.0.0.2", "port": "8000"}
    assert config.robot.max_state_age_s == 1.0 and isinstance(config.robot.max_state_age_s, float)
    assert config.robot.joints.limits.max_velocity == (0.5,) * 7
    assert config.robot.topics.joint_states == "/arm/joint_states"
    assert config.robot.topics.eef_pose == "/eef_pose"  # untouched defaults stay
    assert config.robot.object_names == ("a", "b")


@pytest.mark.parametrize("params, message", [
    ({"robot.max_state_age": 0.1}, "unknown parameter"),
    ({"max_steps": "many"}, "max_steps must be int"),
    ({"max_steps": True}, "max_steps must be int"),
    ({"robot.joints.limits.lower": [0.0] * 6}, "limits.lower has 6 values"),
    ({"robot.trajectory_interface": "ftp"}, "trajectory_interface"),
    ({"robot.joints.names": ["a", "a"]}, "unique"),
])
def test_bad_params_are_errors(params, message):
    with pytest.raises(ConfigError, match=message):
        from_params(SupervisorNodeConfig, params)


def test_shipped_parameter_files_are_valid():
    """Every node section of the shipped files builds its node's settings, and they fit together:
    the supervisor's task has shipped references, the recorder follows the supervisor's events and
    records its mode, every recorded topic names its message type."""
    import yaml

    nodes = {"supervisor": SupervisorNodeConfig, "sim_arm": SimArmConfig, "recorder": RecorderConfig}
    for path in ("launch/sim.yaml", "launch/robot.yaml"):
        data = yaml.safe_load(open(path))
        configs = {spec.executable: (spec.name, from_params(nodes[spec.executable],
                                                            _flatten(data[spec.name]["ros__parameters"])))
                   for spec in read_launch_spec(path)}
        supervisor_name, supervisor = configs["supervisor"]
        assert (SHIPPED_REFERENCES / supervisor.suite / f"{supervisor.task}.npz").exists(), path
        assert supervisor.episode_steps == max_steps_for(supervisor.suite)
        _, recorder = configs["recorder"]
        assert recorder.events_topic == f"/{supervisor_name}/events"
        assert f"/{supervisor_name}/mode:std_msgs/msg/String" in recorder.topics
        assert all(topic.startswith("/") and "/msg/" in kind for topic, kind in (t.split(":") for t in recorder.topics))
        if "sim_arm" in configs:
            _, arm = configs["sim_arm"]
            assert arm.joints.names == supervisor.robot.joints.names and arm.suite == supervisor.suite


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key not in ("policy_options", "cameras"):
            out.update(_flatten(value, f"{prefix}{key}."))
        elif isinstance(value, dict):
            out.update({f"{prefix}{key}.{k}": v for k, v in value.items()})
        else:
            out[prefix + key] = value
    return out


def test_launch_spec_lists_nodes_and_rejects_bad_files(tmp_path):
    specs = read_launch_spec("launch/sim.yaml")
    assert [(s.name, s.executable) for s in specs] == [
        ("libero_arm", "sim_arm"), ("recovery_supervisor", "supervisor"), ("episode_recorder", "recorder")]
    assert specs[1].module == "ros_nodes.supervisor_node"
    bad = tmp_path / "bad.yaml"
    bad.write_text("launch:\n  ros__parameters:\n    nodes: ['x:teleport']\nx:\n  ros__parameters: {a: 1}\n")
    with pytest.raises(LaunchSpecError, match="unknown executable 'teleport'"):
        read_launch_spec(bad)
    bad.write_text("launch:\n  ros__parameters:\n    nodes: ['y:supervisor']\n")
    with pytest.raises(LaunchSpecError, match="no parameter section"):
        read_launch_spec(bad)
    with pytest.raises(LaunchSpecError, match="does not exist"):
        read_launch_spec(tmp_path / "missing.yaml")


def test_launch_file_starts_the_nodes_the_parameter_file_lists(monkeypatch):
    """launch_ros has no wheels: stand-ins with its contract (Node(package, executable, name,
    parameters), an OpaqueFunction called with a context) run the real launch file."""
    import importlib.util
    import sys
    import types

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return context[self.name]

    class Recorded:  # an action: keeps what it was built with
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    modules = {"launch": {"LaunchDescription": lambda actions: actions},
               "launch.actions": {"DeclareLaunchArgument": Recorded, "OpaqueFunction": Recorded},
               "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
               "launch_ros": {}, "launch_ros.actions": {"Node": Recorded}}
    for name, attrs in modules.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))
    spec = importlib.util.spec_from_file_location("recovery_launch", "launch/recovery.launch.py")
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)

    declared, opaque = launch_file.generate_launch_description()
    assert declared.args == ("params_file",) and declared.kwargs["default_value"].endswith("launch/sim.yaml")
    nodes = opaque.kwargs["function"]({"params_file": "launch/sim.yaml"})
    assert [(n.kwargs["executable"], n.kwargs["name"]) for n in nodes] == [
        (s.executable, s.name) for s in read_launch_spec("launch/sim.yaml")]
    assert all(n.kwargs["package"] == "ros_nodes" and n.kwargs["parameters"] == ["launch/sim.yaml"] for n in nodes)


# --- conversions ----------------------------------------------------------------------------------------
def test_action_twist_round_trip_is_exact():
    action = np.array([0.3, -1.0, 0.05, 1e-9, -0.2, 0.7, 1.0])
    linear, angular, gripper = action_to_twist(action, 0.05)
    assert linear[1] == pytest.approx(-1.0)  # a unit action: 5 cm per 50 ms period = 1 m/s
    assert np.array_equal(twist_to_action(linear, angular, gripper, 0.05), action) or np.allclose(
        twist_to_action(linear, angular, gripper, 0.05), action, rtol=1e-12, atol=0)
    assert twist_to_action([10.0, 0, 0], [0, 0, 0], 0.0, 0.05)[0] == 1.0  # clipped


def test_axis_angle_matches_robosuite():
    from robosuite.utils.transform_utils import quat2axisangle

    rng = np.random.default_rng(0)
    for quat in [*rng.normal(size=(20, 4)), np.array([0.0, 0.0, 0.0, 1.0])]:
        quat = quat / np.linalg.norm(quat)
        assert np.allclose(quat_to_axis_angle(quat), quat2axisangle(quat.copy()), atol=1e-12)
    state = standard_state(np.ones(3), np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.02, -0.02]))
    assert state.shape == (8,) and np.allclose(state[3:6], 0.0)


def test_images_decode_without_cv_bridge():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    fields = rgb_to_image_fields(rgb)
    assert np.array_equal(image_to_rgb(fields["height"], fields["width"], "rgb8", fields["step"], fields["data"]), rgb)
    bgr_padded = np.zeros((2, 12), dtype=np.uint8)  # 3 px * 3 channels + 3 bytes padding per row
    bgr_padded[:, :9] = rgb[:, :, ::-1].reshape(2, 9)
    assert np.array_equal(image_to_rgb(2, 3, "bgr8", 12, bgr_padded.tobytes()), rgb)
    mono = image_to_rgb(1, 2, "mono8", 2, bytes([7, 9]))
    assert mono.shape == (1, 2, 3) and mono[0, 1].tolist() == [9, 9, 9]
    with pytest.raises(ValueError, match="not supported"):
        image_to_rgb(1, 1, "16UC1", 2, bytes(2))
    with pytest.raises(ValueError, match="does not fit"):
        image_to_rgb(4, 4, "rgb8", 12, bytes(10))


# --- joints and staleness ---------------------------------------------------------------------------------
def test_joint_mapper_reorders_and_rejects_mismatches():
    mapper = JointMapper(("j1", "j2"), ("f1",))
    arm, vel, fingers = mapper.split(["f1", "j2", "j1"], [0.04, 2.0, 1.0], [0.0, 0.2, 0.1])
    assert arm.tolist() == [1.0, 2.0] and vel.tolist() == [0.1, 0.2] and fingers.tolist() == [0.04]
    with pytest.raises(InputError, match="do not match"):
        mapper.split(["j1", "j2", "other"], [0, 0, 0])
    with pytest.raises(InputError, match="do not match"):
        mapper.split(["j1", "j2"], [0, 0])  # a finger missing
    with pytest.raises(InputError, match="3 names but 2 positions"):
        mapper.split(["f1", "j2", "j1"], [0, 0])


def test_stale_or_missing_inputs_raise_with_the_reason():
    cache = ArmStateCache()
    with pytest.raises(StaleStateError, match="no joints received"):
        cache.fresh(("joints",), now=10.0, max_age=0.2)
    cache.put("joints", "q", stamp=9.9)
    assert cache.fresh(("joints",), now=10.0, max_age=0.2) == {"joints": "q"}
    with pytest.raises(StaleStateError, match=r"0\.500 s old"):
        cache.fresh(("joints",), now=10.4, max_age=0.2)
    cache.put("joints", "q", stamp=10.35)
    cache.reject("joints", "names do not match", now=10.4)  # a second publisher, beside the good one ...
    cache.put("joints", "q", stamp=10.45)
    with pytest.raises(StaleStateError, match=r"rejected: names do not match \(0\.050 s ago\)"):
        cache.fresh(("joints",), now=10.45, max_age=0.2)  # ... leaves the state in doubt: hold
    cache.put("joints", "q", stamp=10.65)
    assert cache.fresh(("joints",), now=10.65, max_age=0.2) == {"joints": "q"}  # good messages only, for long enough


def test_non_finite_inputs_are_refused():
    arm = (np.zeros(7), np.zeros(7), np.array([0.04, 0.04]))
    assert check_finite(arm) is arm and check_finite(0.5) == 0.5
    with pytest.raises(InputError, match="not finite"):
        check_finite((np.r_[np.zeros(6), np.nan], np.zeros(7), np.zeros(2)))
    with pytest.raises(InputError, match="not finite"):
        check_finite(float("inf"))


# --- trajectories ------------------------------------------------------------------------------------------
def test_non_finite_trajectories_and_goals_are_refused():
    """Every comparison with NaN is false: without their own check, NaN points passed every limit."""
    path = plan_joint_move(START, START + 0.1, LIMITS, dt=0.05)
    for field in ("positions", "velocities", "accelerations", "times"):
        values = getattr(path, field).copy()
        values.flat[3] = np.nan
        bad = JointPath(**{**{f: getattr(path, f) for f in ("times", "positions", "velocities", "accelerations")},
                           field: values})
        assert check_trajectory(START, bad, LIMITS) == ["times, positions, velocities or accelerations are not "
                                                         "finite (NaN or Inf)"], field
    with pytest.raises(TrajectoryLimitError, match="not finite"):
        plan_joint_move(START, np.r_[START[:6], np.nan], LIMITS, dt=0.05)



def test_plan_respects_velocity_and_acceleration_limits():
    goal = START + np.array([0.6, -0.3, 0.1, 0.2, 0.0, -0.4, 0.05])
    path = plan_joint_move(START, goal, LIMITS, dt=0.05)
    assert np.allclose(path.positions[-1], goal) and np.all(path.velocities[-1] == 0)
    assert check_trajectory(START, path, LIMITS) == []
    assert np.max(np.abs(path.velocities)) <= 1.0 + 1e-9  # the scaled-down Panda limit
    assert np.max(np.abs(path.accelerations)) <= 2.0 + 1e-9
    # the slowest joint (0.6 rad at 1 rad/s, 2 rad/s^2) sets the pace: 0.6/1 + 1/2 = 1.1 s
    assert path.duration == pytest.approx(1.1)
    speeds = np.abs(np.diff(np.vstack([START, path.positions]), axis=0)) / np.diff(np.r_[0, path.times])[:, None]
    assert speeds[:, 0].max() == pytest.approx(1.0, abs=1e-6)  # it does use the limit
    short = plan_joint_move(START, START + 0.01, LIMITS, dt=0.05)  # triangular: never reaches the speed limit
    assert check_trajectory(START, short, LIMITS) == [] and short.duration == pytest.approx(2 * np.sqrt(0.01 / 2))
    assert np.allclose(sample(path, START, 0.0), START) and np.allclose(sample(path, START, 99.0), goal)


def test_plan_refuses_goals_outside_the_limits():
    beyond = START.copy()
    beyond[3] = 0.5  # joint 4 must stay below -0.0698
    with pytest.raises(TrajectoryLimitError, match="outside the position limits at joint"):
        plan_joint_move(START, beyond, LIMITS, dt=0.05)
    with pytest.raises(TrajectoryLimitError, match="more than the allowed 0.5 rad"):
        plan_joint_move(START, START + 0.8, LIMITS, dt=0.05, max_joint_step=0.5)


def test_check_flags_trajectories_that_break_limits():
    goal = START + 0.5
    fast = JointPath(np.array([0.1]), goal[None], np.zeros((0,)), np.zeros((0,)))  # 5 rad/s
    assert any("velocity limit exceeded: joint 0" in p for p in check_trajectory(START, fast, LIMITS))
    jerky = plan_joint_move(START, goal, LIMITS, dt=0.05)
    jerky = JointPath(jerky.times, jerky.positions, jerky.velocities, jerky.accelerations * 3)
    assert check_trajectory(START, jerky, LIMITS) == ["point accelerations exceed the acceleration limits"]
    backwards = JointPath(np.array([0.5, 0.4]), np.vstack([goal, goal]), np.zeros((0,)), np.zeros((0,)))
    assert check_trajectory(START, backwards, LIMITS) == ["time_from_start must be positive and strictly increasing"]
    outside = JointPath(np.array([10.0]), np.r_[START[:3], 1.0, START[4:]][None], np.zeros((0,)), np.zeros((0,)))
    assert check_trajectory(START, outside, LIMITS) == ["positions outside the joint limits"]


def test_robot_config_period_and_joint_config_validation():
    assert RobotConfig(control_rate_hz=10.0).period == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="positive"):
        JointConfig(limits=JointLimits(max_velocity=(0.0,) * 7))


# --- bags --------------------------------------------------------------------------------------------------
def test_episode_bag_is_a_readable_mcap_rosbag2(tmp_path):
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from ros_nodes.bag import EpisodeBag

    store = get_typestore(Stores.ROS2_JAZZY)
    String = store.types["std_msgs/msg/String"]
    bag = EpisodeBag(tmp_path / "episode_0001")
    for i, mode in enumerate(["EXECUTE", "ROLLBACK", "EXECUTE"]):
        bag.write("/recovery_supervisor/mode", "std_msgs/msg/String", 1000 + i,
                  bytes(store.serialize_cdr(String(data=mode), "std_msgs/msg/String")))
    bag.close()
    assert list((tmp_path / "episode_0001").glob("*.mcap"))
    with Reader(tmp_path / "episode_0001") as reader:
        modes = [store.deserialize_cdr(raw, conn.msgtype).data for conn, _, raw in reader.messages()]
    assert modes == ["EXECUTE", "ROLLBACK", "EXECUTE"]
    with pytest.raises(FileExistsError):
        EpisodeBag(tmp_path / "episode_0001")
