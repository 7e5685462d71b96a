"""ROS 2 layer of the agentic-recovery stack: the supervisor on a real (or simulated) arm.

Only the ``*_node`` modules and ``ros_backend``/``messages`` import rclpy; everything else here is
plain Python (configuration, conversions, trajectory timing, safety checks, bag writing, the
process launcher) and is tested without ROS, py_trees_ros style.
"""

import recovery.core.float_paths  # noqa: F401  (first: pins the CPU-dependent float paths before numpy loads)
