"""Selector training throughput: decisions per second with 1 and with 2 environments, and the share
of training wall time spent in simulation vs in the PPO update, measured side by side in one run
(1-env and 2-env runs alternate, so drift on a shared machine hits both).

Writes benchmarks/results/selector_throughput.json.
Usage: python benchmarks/selector_throughput.py [--decisions 512] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from recovery.learning.env import SelectorEnvConfig
from recovery.learning.train import PPOConfig, TrainSelectorConfig, train_selector
from recovery.learning.warm_start import WarmStartConfig

OUT = Path(__file__).parent / "results" / "selector_throughput.json"


def measure(config: TrainSelectorConfig) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        train_selector(replace(config, out=Path(tmp) / "run"))
        return json.loads((Path(tmp) / "run" / "throughput.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--decisions", type=int, default=512, help="per run (default 512)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    base = TrainSelectorConfig(env=SelectorEnvConfig(suite="libero_object"), ppo=PPOConfig(n_steps=128),
                               warm_start=WarmStartConfig(decisions=0),  # PPO's own loop is what is timed
                               decisions=args.decisions, eval_every=0, device="cpu", progress=False)
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for envs in (1, 2):
            runs[envs].append(measure(replace(base, envs=envs)))
            print(f"{envs} env(s): {runs[envs][-1]}", flush=True)
    ratios = [two["decisions_per_s"] / one["decisions_per_s"] for one, two in zip(runs[1], runs[2])]
    figures = {
        "decisions_per_run": args.decisions, "repeats": args.repeats, "ppo_n_steps_per_env": 128,
        "decisions_per_s_1_env_median": statistics.median(r["decisions_per_s"] for r in runs[1]),
        "decisions_per_s_2_envs_median": statistics.median(r["decisions_per_s"] for r in runs[2]),
        "speedup_2_vs_1_median": statistics.median(ratios), "speedup_2_vs_1_pairs": [round(r, 3) for r in ratios],
        "update_share_median": statistics.median(r["update_share"] for r in runs[1] + runs[2]),
        "simulation_share_median": statistics.median(r["simulation_share"] for r in runs[1] + runs[2]),
        "runs": runs,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
