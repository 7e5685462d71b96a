"""ROS node ``recorder``: one rosbag2 (MCAP) bag per episode of the supervisor.

Subscribes to the configured topics as raw CDR and stores them byte for byte, with the
supervisor's events and mode (so mode switches and rollbacks are in the bag). The bag opens on the
supervisor's ``episode_start`` event and closes on ``episode_end``, or once the supervisor is gone
(no publisher of its events for ``SUPERVISOR_GONE_S``: a supervisor killed mid-episode), with an
``episode_end`` event of its own written last; it starts with the latest message seen on every
topic (topics arrive in any order: the mode switched on at the start may come just before the
start event), and messages between episodes are not recorded. Bags are named by the supervisor's
run and episode, so a restarted supervisor's episodes never mix with the last run's.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import String

from ros_nodes.bag import EpisodeBag
from ros_nodes.config import ConfigError, RecorderConfig
from ros_nodes.runtime import node_main

EVENTS_TYPE = "std_msgs/msg/String"
SUPERVISOR_GONE_S = 1.0


def message_class(msgtype: str) -> type:
    """``package/msg/Type`` -> the message class."""
    package, _, name = msgtype.rpartition("/")
    try:
        return getattr(importlib.import_module(package.replace("/", ".")), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"unknown message type {msgtype!r}: {exc}") from exc


def parse_topics(entries: tuple[str, ...]) -> dict[str, str]:
    """``TOPIC:package/msg/Type`` entries -> {topic: type}."""
    topics = {}
    for entry in entries:
        topic, sep, msgtype = entry.rpartition(":")
        if not sep or not topic.startswith("/") or msgtype.count("/") != 2:
            raise ConfigError(f"recorder topic {entry!r} must be /TOPIC:package/msg/Type")
        topics[topic] = msgtype
    return topics


class RecorderNode:
    def __init__(self, node: Node, config: RecorderConfig):
        self.node, self.config = node, config
        self.log = node.get_logger()
        self.bag: EpisodeBag | None = None
        self._run, self._episode = "", 0  # of the open bag
        self._lock = threading.Lock()  # messages (executor thread) vs. closing at shutdown (main thread)
        self._latest: dict[str, tuple[str, bytes]] = {}
        topics = {**parse_topics(config.topics), config.events_topic: EVENTS_TYPE}
        for topic, msgtype in topics.items():
            node.create_subscription(message_class(msgtype), topic,
                                     lambda data, t=topic, m=msgtype: self._on_message(t, m, data), 50, raw=True)
        self.log.info(f"recording {len(topics)} topics per episode into {config.out_dir}")

    def _on_message(self, topic: str, msgtype: str, data: bytes) -> None:
        event = json.loads(deserialize_message(data, String).data) if topic == self.config.events_topic else {}
        now = self.node.get_clock().now().nanoseconds
        with self._lock:
            if event.get("event") == "episode_start":
                self._open(event)
                for other, (other_type, other_data) in self._latest.items():
                    self.bag.write(other, other_type, now, other_data)
            if self.bag is not None:
                self.bag.write(topic, msgtype, now, data)
            if topic != self.config.events_topic:
                self._latest[topic] = (msgtype, data)
            if event.get("event") == "episode_end":
                self.close()

    def wait_and_close(self) -> None:
        """Main loop: watch for a supervisor that is gone mid-episode; at shutdown, finish the open
        bag (an MCAP file needs its footer)."""
        gone_since = None
        while rclpy.ok():
            time.sleep(0.1)
            alive = self.node.count_publishers(self.config.events_topic) > 0
            gone_since = None if alive else (gone_since or time.monotonic())
            if gone_since is not None and time.monotonic() - gone_since >= SUPERVISOR_GONE_S:
                with self._lock:
                    self._end_orphan()
        with self._lock:
            self.close()

    def _end_orphan(self) -> None:
        """Close the bag of an episode whose supervisor is gone, saying so in the bag."""
        if self.bag is None:
            return
        self.log.warning(f"the supervisor is gone mid-episode: closing {self.bag.path}")
        end = {"event": "episode_end", "run": self._run, "episode": self._episode, "success": False,
               "reason": "supervisor gone"}
        self.bag.write(self.config.events_topic, EVENTS_TYPE, self.node.get_clock().now().nanoseconds,
                       serialize_message(String(data=json.dumps(end))))
        self.close()

    def _open(self, start: dict) -> None:
        self.close()
        self._run, self._episode = start.get("run", "run"), start["episode"]
        path = Path(self.config.out_dir) / f"{self._run}_episode_{self._episode:04d}"
        self.bag = EpisodeBag(path)
        self.log.info(f"recording episode {self._episode} of run {self._run} to {path}")

    def close(self) -> None:
        if self.bag is not None:
            self.bag.close()
            self.log.info(f"bag {self.bag.path}: {self.bag.count} messages")
            self.bag = None


def main(args: list[str] | None = None) -> int:
    return node_main("episode_recorder", RecorderConfig,
                     lambda node, config: RecorderNode(node, config).wait_and_close, args)


if __name__ == "__main__":
    sys.exit(main())
