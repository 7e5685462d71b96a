"""The agentic-recovery stack, in layers that depend one way (``.importlinter`` checks them):

- ``recovery.core``: the robot-backend contract, actions, modes, the decision context and the one
  episode loop; no first-party imports.
- ``critics``, ``vla_wrappers``, ``sim`` (top-level packages): quality metrics and value critics,
  base policies, the LIBERO simulation, each on the core.
- ``recovery.supervision``: the supervisor, its memory, grasp monitor, rollbacks and selectors,
  and building one from its parts.
- ``recovery.learning``: the selector's Gymnasium environment and PPO training.
- ``recovery.evaluation``, ``recovery.pipelines``, ``recovery.cli``: the application.
"""

import recovery.core.float_paths  # noqa: F401  (first: pins the CPU-dependent float paths before numpy loads)
