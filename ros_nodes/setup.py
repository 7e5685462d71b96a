"""colcon entry (ament_python): metadata and executables are in setup.cfg; the launch files and
parameter files live in the repository's launch/ folder and are installed to share/ros_nodes."""

from glob import glob

from setuptools import setup

setup(data_files=[
    ("share/ament_index/resource_index/packages", ["resource/ros_nodes"]),
    ("share/ros_nodes", ["package.xml"]),
    ("share/ros_nodes/launch", glob("../launch/*.launch.py") + glob("../launch/*.yaml")),
])
