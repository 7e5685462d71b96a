"""Clone-fitting variants on one train-selector run's teacher decisions (reports/selector_oracle.md).

    python reports/selector_oracle/clone_fit.py RUN_DIR SEED WEIGHT:EPOCHS:DECAY ...

Each variant refits RUN_DIR/selector.zip's network from fresh weights to RUN_DIR/warm_start.npz as the
warm start does (cross-entropy on the teacher's modes, squared error of the value head), with the
interventions' loss weighted by WEIGHT, for EPOCHS epochs, with AdamW's weight DECAY; held out are the
episodes the run's own warm start held out (SEED: the run's --seed). It prints the warm start's
agreement report and, per held-out episode, whether the clone intervened where the teacher did.
"""

import sys

import numpy as np
import torch
from stable_baselines3 import PPO

from recovery.learning.warm_start import TeacherDecisions, agreement, fit_minibatches, held_out

torch.set_num_threads(1)  # the figures in reports/selector_oracle.md were fitted on one thread; more change
# the order of the sums, and 200 epochs carry that into which bursts are caught
run, seed = sys.argv[1], int(sys.argv[2])
data = TeacherDecisions.load(f"{run}/warm_start.npz")
test = held_out(data, 0.2, seed)  # the share WarmStartConfig holds out
obs, actions, returns = (torch.as_tensor(a[~test]) for a in (data.observations, data.actions, data.returns))
held_obs, held_actions = torch.as_tensor(data.observations[test]), torch.as_tensor(data.actions[test])


def episodes_caught(policy) -> tuple[int, int, int]:
    """Held-out episodes where the teacher intervened and the clone did too / did not; episodes
    where only the clone did."""
    with torch.no_grad():
        predicted = policy.get_distribution(held_obs).mode().numpy() != 0
    teacher, episode = held_actions.numpy() != 0, data.episode[test]
    caught = missed = false = 0
    for e in np.unique(episode):
        here = episode == e
        if teacher[here].any():
            caught, missed = caught + predicted[here].any(), missed + (not predicted[here].any())
        else:
            false += predicted[here].any()
    return int(caught), int(missed), int(false)


for spec in sys.argv[3:]:
    weight, epochs, decay = (float(x) for x in spec.split(":"))
    policy = PPO.load(f"{run}/selector.zip", device="cpu").policy
    torch.manual_seed(seed)
    for module in policy.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    weights = torch.where(actions != 0, weight, 1.0)

    def loss(batch):
        values, log_prob, _ = policy.evaluate_actions(obs[batch], actions[batch])
        return -(log_prob * weights[batch]).mean() + torch.nn.functional.mse_loss(values.flatten(), returns[batch])

    fit_minibatches(policy, len(obs), loss, int(epochs), 256, 1e-3, seed, weight_decay=decay)
    print(spec, agreement(policy, held_obs, held_actions), "held-out episodes caught / missed / false:",
          episodes_caught(policy), flush=True)
