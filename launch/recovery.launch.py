"""ROS 2 launch file: start the nodes a parameter file lists (see launch/sim.yaml, launch/robot.yaml).

    ros2 launch ros_nodes recovery.launch.py params_file:=/path/to/params.yaml

The node list comes from the parameter file's ``launch`` section, read by the same function as
``recovery ros up``: one source of truth for both ways of starting the stack.
"""

from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ros_nodes.launch_spec import read_launch_spec

DEFAULT_PARAMS = str(Path(__file__).resolve().parent / "sim.yaml")


def _nodes(context):
    params = LaunchConfiguration("params_file").perform(context)
    return [Node(package="ros_nodes", executable=spec.executable, name=spec.name, parameters=[params],
                 output="screen") for spec in read_launch_spec(params)]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=DEFAULT_PARAMS,
                              description="parameter file listing the nodes and their parameters"),
        OpaqueFunction(function=_nodes),
    ])
