"""Start-up shared by the node executables: parameters -> config, executor, main loop, clean exit."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Callable, TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ros_nodes.config import from_params

C = TypeVar("C")


def node_main(name: str, config_cls: type[C], start: Callable[[Node, C], Callable[[], None]],
              args: list[str] | None = None) -> int:
    """Run node ``name`` (renamed by ``--ros-args -r __node:=...``) configured from its parameters.
    ``start`` wires the node and returns its main loop, run in the main thread until shutdown while
    callbacks are served in another thread. SIGINT/SIGTERM shut ROS down, which ends both.
    Exit code 2: it could not start (bad configuration)."""
    rclpy.init(args=args if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: rclpy.try_shutdown())
    node = Node(name, automatically_declare_parameters_from_overrides=True)
    executor = SingleThreadedExecutor()
    spinner = threading.Thread(target=_spin, args=(executor,), daemon=True)
    try:
        try:
            config = from_params(config_cls, {k: p.value for k, p in node.get_parameters_by_prefix("").items()})
            loop = start(node, config)
        except (ValueError, FileNotFoundError) as exc:  # bad parameters, unknown policy or task, no references
            node.get_logger().fatal(f"cannot start: {exc}")
            return 2
        executor.add_node(node)
        spinner.start()
        loop()
    except Exception:
        if rclpy.ok():
            raise
        # shutting down: a publish or a wait was cut short by it
    finally:
        rclpy.try_shutdown()
        if spinner.is_alive():
            spinner.join()  # destroying the node under a spinning executor aborts the process
        executor.shutdown()
        node.destroy_node()
    return 0


def _spin(executor: SingleThreadedExecutor) -> None:
    try:
        executor.spin()
    except ExternalShutdownException:
        pass
