"""How sensitive is the base policy's outcome after a burst to an imperceptible nudge? At the first
decision after each burst (libero_spatial, the shipped clone deciding until then), play the base
policy alone from there: once as is, and NUDGES times with N(0, SIGMA) added to the position part of the
first action only (SIGMA in action units: a unit moves the goal 5 cm; the rotation part is left alone,
where an exact 0.0 skips the orientation update). All undone."""
import json, sys
import numpy as np
from stable_baselines3 import PPO
from recovery.learning.counterfactual import play_out
from recovery.learning.env import SelectorEnv, SelectorEnvConfig
from recovery.supervision.build import load_rule_config

EPISODES, NUDGES, SIGMA, SEED = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

class Nudged:
    def __init__(self, broker, noise):
        self.broker, self.noise = broker, noise
    def act(self, obs):
        action = np.array(self.broker.act(obs), dtype=np.float64)
        if self.noise is not None:
            action[:3] += self.noise
            self.noise = None
        return action

cfg = SelectorEnvConfig(suite="libero_spatial", disturbances=("action_noise",), disturbed_share=1.0,
                        rule=load_rule_config("reports/counterfactual/libero_spatial_rule_as_shipped_selector.json"))
env = SelectorEnv(cfg)
model = PPO.load("recovery/supervision/checkpoints/libero_spatial.zip", device="cpu")
rng = np.random.default_rng(SEED)
rows = []
for episode in range(EPISODES):
    obs, info = env.reset(seed=SEED * 100_000 + episode)
    done = False
    while not done:
        since = env._backend.steps_since_disturbance
        if since is not None and since < 5:
            args = (env._backend, None, (env._broker,), env._loop.steps, env._loop.config.max_steps)
            exact = play_out(args[0], Nudged(env._broker, None), *args[2:])
            nudged = [play_out(args[0], Nudged(env._broker, rng.normal(0, SIGMA, 3)), *args[2:]) for _ in range(NUDGES)]
            rows.append({"episode": episode, "task": info["task"], "since": since, "alone": exact, "nudged": nudged})
            print(json.dumps(rows[-1]), flush=True)
            break
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, _, _ = env.step(int(action))
env.close()
