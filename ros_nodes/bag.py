"""One episode -> one rosbag2 bag in MCAP storage, written with the pure-Python ``rosbags`` package
(no ros2 bag CLI needed). Messages arrive already CDR-serialised (rclpy raw subscriptions), so they
are stored byte for byte."""

from __future__ import annotations

from pathlib import Path

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

BAG_VERSION = 9  # rosbag2 metadata version of Jazzy


class EpisodeBag:
    """Open on construction; ``write`` adds a connection per topic on first use; ``close`` finishes it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(f"bag {self.path} already exists")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._typestore = get_typestore(Stores.ROS2_JAZZY)
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, object] = {}
        self.count = 0

    def write(self, topic: str, msgtype: str, stamp_ns: int, data: bytes) -> None:
        """``msgtype`` as ``package/msg/Type``; ``data`` the CDR bytes of the message."""
        if topic not in self._connections:
            self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=self._typestore)
        self._writer.write(self._connections[topic], stamp_ns, data)
        self.count += 1

    def close(self) -> None:
        self._writer.close()
