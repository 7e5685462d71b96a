"""The ROS path for real: rclpy node processes started by `recovery ros up` on loopback, each test
in its own ROS domain with discovery limited to this machine.

- the supervisor node drives the simulated LIBERO arm through a whole episode (and records it);
- a disturbance makes it roll back: a JointTrajectory within the limits, executed by the arm;
- safety: stale joint states, wrong joint names, a policy server that is down and the emergency
  stop each keep every command off the arm (the supervisor is driven here by a test publisher
  playing the arm driver, which can send what a broken driver would).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy", reason="rclpy is not installed: pip install -e '.[ros]' (make test does)")

from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped  # noqa: E402
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool, Float64, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from ros_nodes.config import JointLimits  # noqa: E402
from ros_nodes.messages import LATCHED, duration  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.sim]

REPO = Path(__file__).resolve().parents[1]
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
FINGERS = ["panda_finger_joint1", "panda_finger_joint2"]
HOME = [0.0, -0.13, 0.0, -2.46, 0.0, 2.23, 0.78]
STARTUP_S = 120.0  # node processes import torch, LIBERO, ...: slow on busy CPUs


@pytest.fixture
def domain(monkeypatch) -> int:
    """A ROS domain of this test alone; discovery stays on this machine."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    domain_id = random.Random(f"{os.getpid()}-{time.time_ns()}").randint(1, 100)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain_id))
    return domain_id


class Probe:
    """The test's own rclpy node: records topics, calls services, publishes."""

    def __init__(self, domain_id: int):
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("test_probe", context=self.context)
        self.messages: dict[str, list] = defaultdict(list)
        self._clients: dict[str, object] = {}
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        threading.Thread(target=self._spin, daemon=True).start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass

    def listen(self, topic: str, msg_type, qos=100) -> None:
        self.node.create_subscription(msg_type, topic, lambda m: self.messages[topic].append((time.monotonic(), m)),
                                      qos)

    def events(self, name: str | None = None) -> list[dict]:
        out = [json.loads(m.data) for _, m in self.messages["/recovery_supervisor/events"]]
        return [e for e in out if name is None or e["event"] == name]

    def count(self, topic: str, since: float = 0.0) -> int:
        return sum(1 for t, _ in self.messages[topic] if t >= since)

    def call(self, service: str, timeout: float = 30.0) -> Trigger.Response:
        if service not in self._clients:
            client = self.node.create_client(Trigger, service)
            assert client.wait_for_service(timeout_sec=STARTUP_S), f"service {service} never came up"
            # the server has matched our requests, but maybe not yet our reply reader: Fast DDS then
            # drops the reply (ros2/ros2#1253), which happens on a loaded machine; give discovery a moment
            time.sleep(1.0)
            self._clients[service] = client
        future = self._clients[service].call_async(Trigger.Request())
        wait_until(future.done, timeout, f"a reply from {service}")
        return future.result()

    def close(self) -> None:
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


@contextmanager
def stack(tmp_path: Path, edit):
    """`recovery ros up` on a copy of launch/sim.yaml changed by ``edit``; stopped with Ctrl-C (SIGINT)
    at the end, which must end every node cleanly."""
    params = yaml.safe_load((REPO / "launch" / "sim.yaml").read_text())
    params["episode_recorder"]["ros__parameters"]["out_dir"] = str(tmp_path / "bags")
    edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    log = tmp_path / "nodes.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "recovery", "ros", "up", str(path)], cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert code == 0, f"`recovery ros up` exited with {code}:\n{log.read_text()[-3000:]}"


def bag_topics(bags: Path) -> dict[str, list]:
    """Every message of the episode bag(s) under ``bags``, deserialised, by topic."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    topics: dict[str, list] = defaultdict(list)
    for bag in sorted(bags.iterdir()):
        assert list(bag.glob("*.mcap")), f"{bag} holds no MCAP file"
        with Reader(bag) as reader:
            for conn, _, raw in reader.messages():
                topics[conn.topic].append(store.deserialize_cdr(raw, conn.msgtype))
    return topics


# --- supervisor node + simulated arm --------------------------------------------------------------------
def _arm_and_supervisor(max_steps: int, selector: str, disturbance: str = "none"):
    def edit(params: dict) -> None:
        params["recovery_supervisor"]["ros__parameters"].update(max_steps=max_steps, selector=selector)
        arm = params["libero_arm"]["ros__parameters"]
        arm["disturbance"] = {"name": disturbance, "onset_min": 10, "onset_max": 10}
    return edit


def test_supervisor_and_simulated_arm_complete_an_episode(domain, tmp_path):
    probe = Probe(domain)
    for topic, kind in (("/recovery_supervisor/events", String), ("/servo/delta_twist_cmds", TwistStamped),
                        ("/libero_arm/trajectory_status", String), ("/joint_states", JointState)):
        probe.listen(topic, kind)
    try:
        # selector none: the full supervisor (metrics, critics, memory) that never intervenes, so that the
        # outcome is the policy's over ROS, not the rule's (tested below)
        with stack(tmp_path, _arm_and_supervisor(max_steps=220, selector="none")):
            reply = probe.call("/recovery_supervisor/start_episode")
            assert reply.success, reply.message
            wait_until(lambda: probe.events("episode_end"), 90, "the end of the episode")
            end = probe.events("episode_end")[0]
            # the embedded policy solves this task in LIBERO (~113 steps); over ROS it must too
            assert end["success"] and end["reason"] == "success", end
            assert 60 < end["steps"] < 220
            assert probe.count("/servo/delta_twist_cmds") >= end["steps"]  # one command per control step

            # a trajectory beyond the velocity limits is refused by the arm, and it does not move
            time.sleep(0.5)
            pub = probe.node.create_publisher(JointTrajectory, "/arm_controller/joint_trajectory", 10)
            too_fast = JointTrajectory(joint_names=JOINTS, points=[JointTrajectoryPoint(
                positions=[q + 0.5 for q in HOME], time_from_start=duration(0.1))])
            wait_until(lambda: pub.get_subscription_count() > 0, 10, "the arm's trajectory subscription")
            before = probe.count("/libero_arm/trajectory_status")
            pub.publish(too_fast)
            wait_until(lambda: probe.count("/libero_arm/trajectory_status") > before, 10, "the arm's verdict")
            verdict = json.loads(probe.messages["/libero_arm/trajectory_status"][before][1].data)
            assert verdict["state"] == "rejected" and "velocity limit exceeded" in verdict["reason"]

            # NaN passes every limit comparison: it used to start, crash the arm's tick and the stack with it
            nan = JointTrajectory(joint_names=JOINTS, points=[JointTrajectoryPoint(
                positions=HOME[:-1] + [float("nan")], time_from_start=duration(2.0))])
            twist = probe.node.create_publisher(TwistStamped, "/servo/delta_twist_cmds", 10)
            nan_twist = TwistStamped()
            nan_twist.header.stamp = probe.node.get_clock().now().to_msg()
            nan_twist.twist.linear.x = float("nan")
            before = probe.count("/libero_arm/trajectory_status")
            pub.publish(nan)
            twist.publish(nan_twist)
            wait_until(lambda: probe.count("/libero_arm/trajectory_status") >= before + 2, 10, "both verdicts")
            verdicts = [json.loads(m.data) for _, m in probe.messages["/libero_arm/trajectory_status"][before:]]
            assert all(v["state"] == "rejected" and "not finite" in v["reason"] for v in verdicts), verdicts
            states = probe.count("/joint_states")
            time.sleep(1.0)
            assert probe.count("/joint_states") > states + 5  # the arm node is alive and publishing
        assert not probe.events("hold"), probe.events("hold")  # the episode starts from a fresh state
        bag = bag_topics(tmp_path / "bags")
        modes = [m.data for m in bag["/recovery_supervisor/mode"]]
        assert "EXECUTE" in modes  # the mode switches are in the bag
        assert len(bag["/servo/delta_twist_cmds"]) >= end["steps"] - 5 and bag["/joint_states"]
        assert any(m.data for m in bag["/task_success"])
    finally:
        probe.close()


def test_disturbance_triggers_a_rollback_trajectory_the_arm_executes(domain, tmp_path):
    probe = Probe(domain)
    probe.listen("/recovery_supervisor/events", String)
    probe.listen("/arm_controller/joint_trajectory", JointTrajectory)
    probe.listen("/libero_arm/trajectory_status", String)
    probe.listen("/joint_states", JointState, qos=10)
    try:
        with stack(tmp_path, _arm_and_supervisor(max_steps=60, selector="rule", disturbance="action_noise")):
            assert probe.call("/recovery_supervisor/start_episode").success
            wait_until(lambda: probe.events("episode_end"), 90, "the end of the episode")
        decisions = probe.events("decision")
        assert decisions and decisions[0]["mode"] in ("RETRY", "REPAIR", "RESET"), probe.events()
        start, end = decisions[0], probe.events("rollback_end")[0]
        statuses = [json.loads(m.data) for _, m in probe.messages["/libero_arm/trajectory_status"]]
        assert end["reached"], (probe.events(), statuses)
        # what went out: a joint trajectory within the configured limits, to the stored joints
        _, msg = probe.messages["/arm_controller/joint_trajectory"][0]
        assert list(msg.joint_names) == JOINTS and len(msg.points) > 2
        limits = JointLimits(max_velocity=(1.0,) * 7, max_acceleration=(2.0,) * 7)
        assert max(abs(v) for p in msg.points for v in p.velocities) <= max(limits.max_velocity) + 1e-9
        assert max(abs(a) for p in msg.points for a in p.accelerations) <= max(limits.max_acceleration) + 1e-9
        assert np.allclose(msg.points[-1].positions, start["goal"])
        # ... and the arm executed it: it reports success, and its joints arrived at the goal
        assert [s["state"] for s in statuses[:2]] == ["executing", "succeeded"], statuses
        assert statuses[1]["pos_error"] < 0.005 and statuses[1]["joint_error"] < 0.05
        end_episode = probe.events("episode_end")[0]
        assert end_episode["summary"]["rollbacks"] >= 1 and end_episode["summary"]["recovery_steps"] > 0
        bag = bag_topics(tmp_path / "bags")
        assert "ROLLBACK" in [m.data for m in bag["/recovery_supervisor/mode"]]
        assert bag["/arm_controller/joint_trajectory"] and bag["/libero_arm/trajectory_status"]
    finally:
        probe.close()


# --- safety: the supervisor node alone, a test publisher playing the arm driver --------------------------
class FakeArmDriver:
    """Publishes what an arm driver (and a perception node) would: joint states, eef pose, wrench,
    object poses, at 50 Hz; its joint names and the age of its stamps can be made wrong on purpose."""

    def __init__(self, probe: Probe, objects: list[str]):
        self.probe, self.names, self.lag_s = probe, JOINTS + FINGERS, 0.0
        node = probe.node
        self._joints = node.create_publisher(JointState, "/joint_states", 10)
        self._pose = node.create_publisher(PoseStamped, "/eef_pose", 10)
        self._wrench = node.create_publisher(WrenchStamped, "/external_wrench", 10)
        self._objects = [node.create_publisher(PoseStamped, f"/objects/{name}/pose", 10) for name in objects]
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._running:
            stamp = (self.probe.node.get_clock().now() - rclpy.duration.Duration(seconds=self.lag_s)).to_msg()
            joints = JointState(name=list(self.names), position=(HOME + [0.02, 0.02])[: len(self.names)])
            joints.header.stamp = stamp
            pose = PoseStamped()
            pose.header.stamp = stamp
            pose.pose.position.x, pose.pose.position.z, pose.pose.orientation.x = -0.2, 1.1, 1.0
            wrench = WrenchStamped()
            wrench.header.stamp = stamp
            try:
                for pub, msg in ((self._joints, joints), (self._pose, pose), (self._wrench, wrench),
                                 *((p, pose) for p in self._objects)):
                    pub.publish(msg)
            except Exception:  # the probe is closing
                return
            time.sleep(0.02)

    def stop(self) -> None:
        self._running = False
        self._thread.join()


@pytest.fixture
def policy_server():
    """A real openpi policy server (the zero policy) on a free port; ``.stop()`` takes it down."""
    from vla_wrappers.openpi.server import PolicyServer
    from vla_wrappers.registry import ZeroPolicy

    class Handle:
        def __init__(self):
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self.server = None

        def start(self):
            self.server = PolicyServer(ZeroPolicy()).build("127.0.0.1", self.port)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()

        def stop(self):
            if self.server is not None:
                self.server.shutdown()
                self.server = None

    handle = Handle()
    yield handle
    handle.stop()


COMMAND_TOPICS = (("/servo/delta_twist_cmds", TwistStamped), ("/gripper/command", Float64),
                  ("/arm_controller/joint_trajectory", JointTrajectory))


@contextmanager
def supervisor_alone(domain, tmp_path, port: int):
    """The supervisor node (openpi policy on ``port``, no selector) with the test as its arm driver."""
    def edit(params: dict) -> None:
        params["launch"]["ros__parameters"]["nodes"] = ["recovery_supervisor:supervisor"]
        sup = params["recovery_supervisor"]["ros__parameters"]
        sup.update(policy="openpi", selector="none", max_steps=100_000, scene_reset_service="",
                   policy_options={"host": "127.0.0.1", "port": port, "timeout_s": 1.0, "attempts": 1})
        objects.extend(sup["robot"]["object_names"])  # the value critic (where shipped) reads them

    objects: list[str] = []

    probe = Probe(domain)
    probe.listen("/recovery_supervisor/events", String)
    probe.listen("/recovery_supervisor/mode", String, LATCHED)
    for topic, kind in COMMAND_TOPICS:
        probe.listen(topic, kind)
    try:
        with stack(tmp_path, edit) as log:
            driver = FakeArmDriver(probe, objects)
            yield probe, driver, log
            driver.stop()
    finally:
        probe.close()


def commands_since(probe: Probe, since: float) -> int:
    return sum(probe.count(topic, since) for topic, _ in COMMAND_TOPICS)


def mode(probe: Probe) -> str:
    return probe.messages["/recovery_supervisor/mode"][-1][1].data


def test_stale_joint_states_hold_and_wrong_joint_names_are_rejected(domain, tmp_path, policy_server):
    policy_server.start()
    with supervisor_alone(domain, tmp_path, policy_server.port) as (probe, driver, log):
        assert probe.call("/recovery_supervisor/start_episode").success
        wait_until(lambda: probe.count("/servo/delta_twist_cmds") >= 10, 30, "commands from fresh states")

        driver.lag_s = 1.0  # stamps 1 s old: stale (max_state_age_s 0.25)
        wait_until(lambda: mode(probe) == "HOLD", 10, "HOLD on stale joint states")
        since = time.monotonic()
        time.sleep(1.5)
        assert commands_since(probe, since) == 0
        assert any("StaleStateError: joints is" in e["reason"] for e in probe.events("hold"))

        driver.lag_s = 0.0  # fresh again: acting resumes
        wait_until(lambda: probe.count("/servo/delta_twist_cmds", time.monotonic() - 0.5) > 3, 10, "commands again")

        driver.names = JOINTS[:-1] + ["elbow_joint"] + FINGERS  # a joint the configuration does not have
        wait_until(lambda: mode(probe) == "HOLD", 10, "HOLD on rejected joint states")
        since = time.monotonic()
        time.sleep(1.5)
        assert commands_since(probe, since) == 0
        driver.names = JOINTS  # fingers missing: the count is wrong too
        time.sleep(1.0)
        assert commands_since(probe, since) == 0
        reasons = " ".join(e["reason"] for e in probe.events("hold"))
        assert "rejected: JointState names" in reasons and "do not match the configured" in reasons
    assert "rejected joints: JointState names" in log.read_text()  # logged as an error


def test_policy_server_down_holds_and_reports(domain, tmp_path, policy_server):
    with supervisor_alone(domain, tmp_path, policy_server.port) as (probe, driver, log):
        assert probe.call("/recovery_supervisor/start_episode").success  # nothing listens on the port yet
        wait_until(lambda: probe.events("hold"), 30, "a hold report")
        time.sleep(1.5)
        assert commands_since(probe, 0.0) == 0 and mode(probe) == "HOLD"
        reason = probe.events("hold")[0]["reason"]
        assert "PolicyServerError" in reason and "unreachable" in reason

        policy_server.start()  # the server comes (back): the episode goes on
        wait_until(lambda: probe.count("/servo/delta_twist_cmds") >= 5, 30, "commands once the server is up")
        assert mode(probe) == "EXECUTE"


def test_emergency_stop_blocks_every_command_until_reset(domain, tmp_path, policy_server):
    policy_server.start()
    with supervisor_alone(domain, tmp_path, policy_server.port) as (probe, driver, log):
        probe.listen("/emergency_stop", Bool, LATCHED)
        assert probe.call("/recovery_supervisor/start_episode").success
        wait_until(lambda: probe.count("/servo/delta_twist_cmds") >= 10, 30, "commands")

        reply = probe.call("/recovery_supervisor/emergency_stop")
        after = time.monotonic()
        assert reply.success
        wait_until(lambda: mode(probe) == "ESTOP", 5, "ESTOP on ~/mode")
        wait_until(lambda: probe.events("episode_end"), 10, "the episode to end")
        assert probe.events("episode_end")[0]["reason"] == "emergency_stop"
        time.sleep(1.5)
        assert commands_since(probe, after) == 0
        assert probe.messages["/emergency_stop"][-1][1].data is True and mode(probe) == "ESTOP"
        refused = probe.call("/recovery_supervisor/start_episode")
        assert not refused.success and "emergency stop" in refused.message
        time.sleep(0.5)
        assert commands_since(probe, after) == 0

        modes = [m.data for _, m in probe.messages["/recovery_supervisor/mode"]]
        assert modes[modes.index("ESTOP"):] == ["ESTOP"]  # the episode thread never switched it back
        assert probe.call("/recovery_supervisor/reset_emergency_stop").success
        wait_until(lambda: probe.messages["/emergency_stop"][-1][1].data is False, 5, "the released e-stop")
        assert probe.call("/recovery_supervisor/start_episode").success
        wait_until(lambda: commands_since(probe, after) >= 5, 30, "commands after the reset")


def test_bad_joint_states_from_a_second_publisher_hold_and_report(domain, tmp_path, policy_server):
    """Beside the real driver, a misconfigured publisher sends joint states with a wrong count, then
    with NaN positions: the arm's state is in doubt, so the supervisor holds and says why; once only
    good states come again, it acts again."""
    policy_server.start()
    with supervisor_alone(domain, tmp_path, policy_server.port) as (probe, driver, log):
        assert probe.call("/recovery_supervisor/start_episode").success
        wait_until(lambda: probe.count("/servo/delta_twist_cmds") >= 10, 30, "commands from good states")
        second = probe.node.create_publisher(JointState, "/joint_states", 10)
        for names, positions, why in ((JOINTS, HOME, "do not match the configured"),
                                      (JOINTS + FINGERS, HOME[:-1] + [float("nan"), 0.02, 0.02], "not finite")):
            stop = threading.Event()

            def publish():
                while not stop.is_set():
                    msg = JointState(name=list(names), position=list(positions))
                    msg.header.stamp = probe.node.get_clock().now().to_msg()
                    second.publish(msg)
                    time.sleep(0.1)

            thread = threading.Thread(target=publish, daemon=True)
            thread.start()
            try:
                wait_until(lambda: mode(probe) == "HOLD", 10, f"HOLD on joint states that {why}")
                since = time.monotonic()
                time.sleep(1.0)
                assert commands_since(probe, since) == 0
                assert any(why in e["reason"] for e in probe.events("hold")), probe.events("hold")
            finally:
                stop.set()
                thread.join()
            wait_until(lambda: mode(probe) == "EXECUTE", 10, "acting again on good states alone")


def test_the_recorder_closes_the_bag_of_a_supervisor_that_is_gone(domain, tmp_path):
    """The supervisor dies mid-episode (here: the test plays it and goes away): the bag is closed,
    readable, and says why; the bag is named by the supervisor's run."""
    def recorder_only(params: dict) -> None:
        params["launch"]["ros__parameters"]["nodes"] = ["episode_recorder:recorder"]

    probe = Probe(domain)
    try:
        with stack(tmp_path, recorder_only):
            events = probe.node.create_publisher(String, "/recovery_supervisor/events", 100)
            modes = probe.node.create_publisher(String, "/recovery_supervisor/mode", LATCHED)
            wait_until(lambda: events.get_subscription_count() > 0, STARTUP_S, "the recorder")
            start = {"event": "episode_start", "run": "20261201-000000", "episode": 7, "instruction": "x"}
            events.publish(String(data=json.dumps(start)))
            modes.publish(String(data="EXECUTE"))
            bag_dir = tmp_path / "bags" / "20261201-000000_episode_0007"
            wait_until(bag_dir.exists, 10, "the episode's bag")
            probe.node.destroy_publisher(events)  # the supervisor is gone, its episode never ends
            wait_until(lambda: "supervisor gone" in json.dumps([m.data for m in _readable(bag_dir)]), 15,
                       "the bag to be closed")
    finally:
        probe.close()


def _readable(bag_dir: Path) -> list:
    """The events in a closed bag ([] while it is still open: an MCAP file without its footer)."""
    try:
        return bag_topics(bag_dir.parent)["/recovery_supervisor/events"]
    except Exception:
        return []
