"""ROS node ``supervisor``: the recovery supervisor driving an arm through ROS 2.

The same Supervisor as in LIBERO (base policy through the chunk broker, quality metrics, value and
risk critics, mode selector, physical rollback) and the same episode loop, over a RosBackend; the
node's topics are one more subscriber of the loop.

Interface (``~`` is the node's name):
- services (std_srvs/Trigger): ``~/start_episode``, ``~/stop_episode``, ``~/emergency_stop``,
  ``~/reset_emergency_stop``
- ``~/instruction`` (std_msgs/String, in): the instruction of the next episode
- ``~/mode`` (std_msgs/String, latched): IDLE | EXECUTE | HOLD | ROLLBACK | ESTOP
- ``~/events`` (std_msgs/String, JSON, each with the node's ``run`` and the ``episode``): episode_start,
  hold, decision (a rollback starts), rollback_end, episode_end (with the supervisor's summary),
  emergency_stop
- ``~/status`` (std_msgs/String, JSON): episode, step, mode, rollbacks, every control step
- the emergency-stop topic (std_msgs/Bool, latched): engaged by the service or by anyone else

Holding: a stale input or a policy that fails (e.g. its server is down) sends nothing for that
period, reports why, and tries again the next period (the loop's ``hold_on``); the arm driver's
own command timeout keeps the arm still.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import rclpy
from rclpy.node import Node
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from recovery.core.loop import LoopConfig, Step, Subscriber, run_episode
from recovery.core.modes import Mode
from recovery.supervision.build import build_supervisor, make_selector
from recovery.supervision.config import RecoveryOptions, SupervisorConfig
from ros_nodes.config import SupervisorNodeConfig
from ros_nodes.messages import LATCHED
from ros_nodes.ros_backend import EmergencyStopError, RosBackend
from ros_nodes.runtime import node_main
from ros_nodes.state import StaleStateError
from vla_wrappers.base import PolicyError
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy

SCENE_RESET_TIMEOUT_S = 30.0
FRESH_STATE_TIMEOUT_S = 2.0  # an episode starts from inputs stamped after its (scene) reset


class SupervisorNode:
    def __init__(self, node: Node, config: SupervisorNodeConfig):
        self.node, self.config = node, config
        self.log = node.get_logger()
        self.backend = RosBackend(node, config.robot)
        policy = make_policy(config.policy, self.backend, config.policy_options)
        options = RecoveryOptions(selector=config.selector, rollback="physical", repair=config.repair,
                                  repair_policy=config.repair_policy,
                                  repair_policy_options=config.repair_policy_options,
                                  supervisor=SupervisorConfig(max_rollbacks=config.max_rollbacks))
        self.agent = build_supervisor(self.backend, ChunkBroker(policy, config.replan_every), config.suite,
                                      config.task, make_selector(options, config.suite, config.policy), options)
        self.instruction = config.task_instruction
        self.run_id = time.strftime("%Y%m%d-%H%M%S")  # episodes are numbered within a run of this node
        self.episode, self.mode = 0, ""
        self._start, self._stop = threading.Event(), threading.Event()
        self._running = False
        self._mode_pub = node.create_publisher(String, "~/mode", LATCHED)
        self._events_pub = node.create_publisher(String, "~/events", 100)
        self._status_pub = node.create_publisher(String, "~/status", 10)
        self._estop_pub = node.create_publisher(Bool, config.robot.topics.emergency_stop, LATCHED)
        node.create_subscription(String, "~/instruction", self._on_instruction, 10)
        node.create_subscription(Bool, config.robot.topics.emergency_stop, self._on_estop_topic, LATCHED)
        node.create_service(Trigger, "~/start_episode", self._on_start)
        node.create_service(Trigger, "~/stop_episode", self._on_stop)
        node.create_service(Trigger, "~/emergency_stop", self._on_estop_service)
        node.create_service(Trigger, "~/reset_emergency_stop", self._on_estop_reset)
        self._scene_reset = node.create_client(Trigger, config.scene_reset_service) \
            if config.scene_reset_service else None
        self._set_mode("IDLE")
        self.log.info(f"ready: policy {config.policy}, selector {config.selector}, instruction {self.instruction!r}")

    # --- requests (executor thread) ------------------------------------------------------------------
    def _on_instruction(self, msg: String) -> None:
        self.instruction = msg.data
        self.log.info(f"instruction for the next episode: {msg.data!r}")

    def _on_start(self, request, response: Trigger.Response) -> Trigger.Response:
        if self.backend.estopped:
            response.success, response.message = False, "emergency stop engaged: reset it first"
        elif self._running or self._start.is_set():
            response.success, response.message = False, f"episode {self.episode} is running"
        else:
            self._stop.clear()
            self._start.set()
            response.success, response.message = True, f"starting episode {self.episode + 1}"
        return response

    def _on_stop(self, request, response: Trigger.Response) -> Trigger.Response:
        self._stop.set()
        response.success, response.message = True, "stopping" if self._running else "no episode running"
        return response

    def _on_estop_service(self, request, response: Trigger.Response) -> Trigger.Response:
        self._engage_estop("service")
        self._estop_pub.publish(Bool(data=True))
        response.success, response.message = True, "emergency stop engaged"
        return response

    def _on_estop_topic(self, msg: Bool) -> None:
        if msg.data and not self.backend.estopped:  # released only through ~/reset_emergency_stop
            self._engage_estop("topic")

    def _on_estop_reset(self, request, response: Trigger.Response) -> Trigger.Response:
        self.backend.clear_emergency_stop()
        self._estop_pub.publish(Bool(data=False))
        self._event("emergency_stop_reset")
        self._set_mode("EXECUTE" if self._running else "IDLE")
        response.success, response.message = True, "emergency stop reset"
        return response

    def _engage_estop(self, source: str) -> None:
        self.backend.engage_emergency_stop()  # from here on no command leaves the backend
        self._set_mode("ESTOP")
        self._event("emergency_stop", source=source)
        self.log.warning(f"emergency stop engaged ({source}): no command until reset")

    # --- the control loop (main thread) ----------------------------------------------------------------
    def run(self) -> None:
        while rclpy.ok():
            if self._start.wait(timeout=0.2):
                self._running = True
                self._start.clear()
                try:
                    self._run_episode()
                finally:
                    self._running = False
                    self._set_mode("ESTOP" if self.backend.estopped else "IDLE")

    def _run_episode(self) -> None:
        self.episode += 1
        self.backend.start_episode()
        try:
            self._reset_scene()
        except Exception as exc:  # a scene that cannot reset
            self.log.error(f"episode {self.episode} not started: {exc}")
            self._event("episode_end", success=False, steps=0, reason=f"not started: {exc}")
            return
        if not self.backend.wait_for_state(since=self.backend.now(), timeout=FRESH_STATE_TIMEOUT_S):
            self.log.warning(f"no fresh state within {FRESH_STATE_TIMEOUT_S} s of the start: the episode holds")
        self._event("episode_start", instruction=self.instruction)
        self._set_mode("EXECUTE")
        loop = LoopConfig(max_steps=self.config.episode_steps, wait_steps=0, hold_on=(StaleStateError, PolicyError))
        outcome = run_episode(self.backend, self.agent, self.instruction, loop, (_Topics(self),), self._stop_reason)
        reason = outcome.reason
        if isinstance(outcome.error, EmergencyStopError):
            reason = "emergency_stop"
        elif outcome.error is not None:
            reason = f"error: {outcome.error!r}"
            self.log.error(f"episode {self.episode} aborted: {outcome.error!r}")
        self._event("episode_end", success=outcome.success, steps=outcome.steps, reason=reason,
                    summary=outcome.extras)
        self.log.info(f"episode {self.episode}: {reason} after {outcome.steps} steps, {self.agent.rollbacks} rollbacks")

    def _stop_reason(self) -> str | None:
        if self._stop.is_set():
            return "stopped"
        if self.backend.estopped:
            return "emergency_stop"
        return None if rclpy.ok() else "shutdown"

    def _reset_scene(self) -> None:
        if self._scene_reset is None:
            return
        if not self._scene_reset.wait_for_service(timeout_sec=SCENE_RESET_TIMEOUT_S):
            raise RuntimeError(f"scene reset service {self.config.scene_reset_service} is not available")
        future = self._scene_reset.call_async(Trigger.Request())
        deadline = time.monotonic() + SCENE_RESET_TIMEOUT_S
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not future.done() or not future.result().success:
            raise RuntimeError(f"scene reset {self.config.scene_reset_service} failed")

    # --- outputs ---------------------------------------------------------------------------------------
    def _set_mode(self, mode: str) -> None:
        if self.backend.estopped and mode not in ("ESTOP", "IDLE"):
            mode = "ESTOP"  # the episode thread may still be finishing a period: the record must say ESTOP
        if mode != self.mode:
            self.mode = mode
            self._mode_pub.publish(String(data=mode))

    def _event(self, event: str, **fields) -> None:
        record = {"event": event, "run": self.run_id, "episode": self.episode, **fields}
        self._events_pub.publish(String(data=json.dumps(record, default=float)))

    def _status(self, step: int) -> None:
        self._status_pub.publish(String(data=json.dumps({
            "episode": self.episode, "step": step, "mode": self.mode, "rollbacks": self.agent.rollbacks,
            "recovery_steps": self.agent.recovery_steps, "instruction": self.instruction})))


class _Topics(Subscriber):
    """The episode loop's steps, mode switches and decisions on the node's topics."""

    def __init__(self, node: SupervisorNode):
        self.node = node

    def on_step(self, step: Step) -> None:
        self.node._status(step.index)

    def on_event(self, event: dict) -> None:
        if event["event"] != "mode":
            self.node._event(event.pop("event"), **event)
            return
        if event["mode"] == "HOLD" and "reason" in event:
            self.node.log.warning(f"holding: {event['reason']}")
            self.node._event("hold", reason=event["reason"], step=event["step"])
        mode = Mode[event["mode"]]
        self.node._set_mode("ROLLBACK" if mode.is_rollback else mode.name)


def main(args: list[str] | None = None) -> int:
    return node_main("recovery_supervisor", SupervisorNodeConfig,
                     lambda node, config: SupervisorNode(node, config).run, args)


if __name__ == "__main__":
    sys.exit(main())
