"""Which part of the snapshot's restore wins its episodes: a simulation-only probe (reports/ceiling.md).

Runs ``recovery eval`` in this process with the physical rollback patched: when a rollback ends having
reached its target, one part of the simulator goes back to the target's state, the rest stays as the
physical rollback left it.

- ``velocity``: the arm's joint velocities (a physical rollback ends at rest; the snapshot, moving);
- ``arm``: the arm's and the fingers' joint positions and velocities (an exact arm restore);
- ``world``: every object (free joint): positions and velocities (a perfect repair of the world);
- ``arm+world``: both (what the snapshot restores but for the controller's and the gripper command's state);
- ``world-big``: only the objects more than 2 cm from their place or tilted more than 0.35 rad
  (20 degrees: the taxonomy's thresholds: a perfect repair of what ``recovery taxonomy`` calls damage).

An object the hand held at the target, within 8 cm of the grip there, is left to the rollback (it
carries it back). Patches do not cross process boundaries: run with ``--workers 1`` (we ran two
processes, tasks 0-4 and 5-9, and read the files together).

Usage: python reports/ceiling/restore_parts.py PART eval --suite ... --selector oracle ...
"""

import sys

from recovery.cli import main  # first: recovery pins the float paths before numpy and MuJoCo load (float_paths)
import recovery.supervision.supervisor as supervisor
from recovery.evaluation.taxonomy import DISPLACED, TIPPED
from recovery.supervision.config import RepairConfig
from recovery.supervision.repair import pose_change

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

PARTS = ("velocity", "arm", "world", "arm+world", "world-big")
CARRIED = RepairConfig.held  # m: an object this close to the grip of a target that held something is in the hand


def _robot_indexes(backend) -> tuple[np.ndarray, np.ndarray, int]:
    """qpos and qvel indexes of the arm's joints then the fingers', and how many are the arm's."""
    robot = backend.raw.robots[0]
    qpos = list(robot._ref_joint_pos_indexes) + list(robot._ref_gripper_joint_pos_indexes)
    qvel = list(robot._ref_joint_vel_indexes) + list(robot._ref_gripper_joint_vel_indexes)
    return np.array(qpos), np.array(qvel), len(robot._ref_joint_vel_indexes)


def _free_joints(model) -> list[tuple[int, int]]:
    return [(int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])) for j in range(model.njnt)
            if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]


def _damaged(now: np.ndarray, then: np.ndarray) -> bool:
    """Whether a free joint's pose ``now`` (MuJoCo's pos + wxyz) lies beyond the taxonomy's thresholds from
    ``then``: displaced more than 2 cm or tilted more than 0.35 rad (``pose_change``, poses in xyzw)."""
    displacement, tilt = pose_change(*(np.r_[q[:3], q[4:7], q[3]] for q in (then, now)))
    return displacement > DISPLACED or tilt > TIPPED


def _restore_part(part: str, backend, target) -> None:
    model, data = backend._mj
    qpos, qvel = target.snapshot
    if part in ("velocity", "arm", "arm+world"):
        pos_idx, vel_idx, arm = _robot_indexes(backend)
        if part == "velocity":
            vel_idx = vel_idx[:arm]
        else:
            data.qpos[pos_idx] = qpos[pos_idx]
        data.qvel[vel_idx] = qvel[vel_idx]
    if part in ("world", "arm+world", "world-big"):
        for pa, da in _free_joints(model):
            if target.holding and np.linalg.norm(qpos[pa:pa + 3] - target.pose.pos) < CARRIED:
                continue
            if part != "world-big" or _damaged(data.qpos[pa:pa + 7], qpos[pa:pa + 7]):
                data.qpos[pa:pa + 7] = qpos[pa:pa + 7]
                data.qvel[da:da + 6] = qvel[da:da + 6]
    mujoco.mj_forward(model, data)


def patch(part: str) -> None:
    def observe(self, obs, _observe=supervisor.Supervisor.observe):
        _observe(self, obs)  # the state recorded, with the simulator's positions and velocities as its "snapshot"
        _, data = self.backend._mj
        self._unscored[-1] = self._unscored[-1]._replace(snapshot=(data.qpos.copy(), data.qvel.copy()))

    def continue_rollback(self, obs, events=()):
        control = self._rollback.next(obs, self.backend.eef_pose(), self._rollback_mode)
        if control is not None:
            return supervisor.Control(control.command, control.mode, control.restore, events)
        if self._rollback.result().reached:
            _restore_part(part, self.backend, self._rollback.target)
            raw = self.backend.raw._get_observations(force_update=True)
            obs = self.backend._obs = self.backend._convert(raw)
        return self._command(obs, events + (self._end_rollback(),))

    supervisor.Supervisor.observe = observe
    supervisor.Supervisor._continue_rollback = continue_rollback


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in PARTS:
        sys.exit(f"usage: python {sys.argv[0]} {{{','.join(PARTS)}}} eval --suite ... (see the docstring)")
    patch(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
