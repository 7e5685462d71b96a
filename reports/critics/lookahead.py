"""Does a critic that sees where the base policy is heading predict the post-burst outcome better?

An experiment, not a tool (the sequel of ``inputs.py`` and ``focus.py``). The one input that lifted
the post-burst AUROC was the base policy's action chunk, its next 8 actions. This looks further: from
every state, the base policy is rolled forward ``HORIZON`` steps in a kinematic model of the arm
(position moves by the fitted gain per unit action, ``critics.tracking``'s 0.010 m; the fingers by a
linear model fitted on the training rollouts; orientation held) and a world where nothing moves but
what the hand holds (within ``HOLD_RADIUS`` of the grip point while the hand closes). Re-planned every
5 steps, as the broker does. No simulator: what a robot could run from its own perception.

The predicted states at 10, 20 and 40 steps ahead enter the critic as the task's objects relative to
the hand and to each other, the fingers, and whether the hand holds the picked object
(``focus.py``'s ``focus, hand frame`` inputs). Variants, trained and scored as ``inputs.py``:

- ``state`` and ``state, +chunk``: the references;
- ``+lookahead``: the state features and the predicted ones;
- ``focus, hand frame, +lookahead``: the task-centred inputs and the predicted ones.

Usage: python reports/critics/lookahead.py SUITE DATA
"""

import sys

import recovery  # noqa: F401  (pins the float paths before numpy is used)
import numpy as np
import torch

from critics.tracking import TrackingConfig
from focus import focus_groups
from inputs import feature_groups, open_store, report, score
from sim.tasks import resolve_tasks
from vla_wrappers.embedded.model import Checkpoint
from vla_wrappers.embedded.policy import shipped_checkpoints

HORIZON = 40
PROBES = (10, 20, 40)  # steps ahead whose predicted state the critic reads
REPLAN = 5  # actions executed of each chunk
HOLD_RADIUS = 0.08  # m, grip point to object (recovery.supervision.repair's "in the hand")

VARIANTS = {
    "state": ("state",),
    "state, +chunk": ("state", "chunk"),
    "state, +lookahead": ("state", "lookahead"),
    "focus, hand frame, +lookahead": ("focus", "hand_frame", "lookahead"),
    "focus, hand frame, +chunk, +lookahead": ("focus", "hand_frame", "chunk", "lookahead"),
}


def fit_fingers(episodes: list[dict]) -> np.ndarray:
    """Least squares of the next finger joints on (fingers, gripper command, 1): (4, 2)."""
    x = np.concatenate([np.concatenate([e["state"][:-1, 6:8], e["actions"][:-1, 6:7],
                                        np.ones((len(e["state"]) - 1, 1))], axis=1) for e in episodes])
    y = np.concatenate([e["state"][1:, 6:8] for e in episodes])
    return np.linalg.lstsq(x, y, rcond=None)[0]


def roll_forward(checkpoint: Checkpoint, fingers_model: np.ndarray, episode: dict, task_id: int,
                 names: list[str]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """From every state of ``episode`` at once: {steps ahead: (predicted 8-D states, predicted poses)}."""
    states = episode["state"].astype(np.float64).copy()
    poses = episode["object_poses"].astype(np.float64).copy()
    gain = TrackingConfig().gain
    held = np.linalg.norm(poses[:, :, :3] - states[:, None, :3], axis=2) < HOLD_RADIUS
    held &= (states[:, 6] - states[:, 7] < 0.07)[:, None]  # fingers closed some way
    probes, step = {}, 0
    while step < HORIZON:
        features = checkpoint.layout.featurize_many(states, [dict(zip(names, p)) for p in poses], task_id)
        with torch.no_grad():
            chunk = checkpoint.net(torch.from_numpy(features)).numpy()
        for action in chunk[:, :REPLAN].transpose(1, 0, 2):
            move = gain * action[:, :3]
            states[:, :3] += move
            poses[:, :, :3] += held[:, :, None] * move[:, None, :]
            states[:, 6:8] = np.concatenate([states[:, 6:8], action[:, 6:7], np.ones((len(states), 1))],
                                            axis=1) @ fingers_model
            near = np.linalg.norm(poses[:, :, :3] - states[:, None, :3], axis=2) < HOLD_RADIUS
            closing = (action[:, 6] > 0)[:, None]
            held = np.where(closing, held | near, False)
            step += 1
            if step in PROBES:
                probes[step] = (states.copy(), poses.copy())
    return probes


def lookahead_inputs(checkpoint: Checkpoint, fingers_model: np.ndarray, episode: dict, task_id: int,
                     objects: tuple[str, str]) -> np.ndarray:
    names = [n.decode() for n in episode["object_names"]]
    columns = []
    for states, poses in roll_forward(checkpoint, fingers_model, episode, task_id, names).values():
        predicted = dict(episode, state=states, object_poses=poses)
        groups = focus_groups(predicted, objects)
        picked = poses[:, names.index(objects[0]), :3]
        holds = (np.linalg.norm(picked - states[:, :3], axis=1) < HOLD_RADIUS).astype(float)[:, None]
        columns += [groups["focus"][:, :3], groups["focus"][:, 9:11], groups["hand_frame"], holds]
    return np.concatenate(columns, axis=1)


def main() -> None:
    config, held, train, _ = open_store(sys.argv, "input")
    groups = feature_groups(held + train, config.suite)
    tasks = resolve_tasks(config.suite, None)
    objects = {t.index: t.objects_of_interest()[:2] for t in tasks}
    checkpoint = Checkpoint.load(shipped_checkpoints()[config.suite])
    fingers_model = fit_fingers([e for e in train if int(e.get("burst_end", -1)) < 0])
    for e in held + train:
        task = int(e["task"])
        task_id = checkpoint.layout.task_id(tasks[task].instruction)
        groups[id(e)].update(focus_groups(e, objects[task]))
        groups[id(e)]["lookahead"] = lookahead_inputs(checkpoint, fingers_model, e, task_id, objects[task])
    for name, names in VARIANTS.items():
        report(name, train, score(train, held, groups, names, 0.99, config.after_burst))


if __name__ == "__main__":
    main()
