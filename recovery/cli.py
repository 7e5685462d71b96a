"""``recovery``: the command line of the agentic-recovery stack.

Each command imports what it runs when it runs: ``recovery --help`` must not load torch and MuJoCo.
Option defaults and choices come from the settings' dataclasses.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from recovery.core.errors import RecoveryError
from recovery.supervision.config import (REPAIRS, ROLLBACKS, SELECTORS, SHIPPED_REFERENCES, TARGET_SCORES,
                                         RecoveryOptions, RepairConfig, RollbackConfig, SupervisorConfig)
from sim.disturbances import DISTURBANCES

if TYPE_CHECKING:  # for annotations only: the learning environment loads MuJoCo
    from recovery.learning.env import RewardConfig, SelectorEnvConfig

EPILOG = """examples:
  recovery tasks --suite libero_object
  recovery eval --suite libero_object --tasks 0 1 --episodes 5 --workers 2
  recovery summarize results/libero_object_expert_seed7.jsonl
"""


def _cmd_tasks(args: argparse.Namespace) -> int:
    from sim.tasks import available_suites, max_steps_for, resolve_tasks

    if not args.suite:
        print("\n".join(available_suites()))
        return 0
    tasks = resolve_tasks(args.suite, None)
    print(f"{args.suite} (max steps {max_steps_for(args.suite)})")
    for task in tasks:
        print(f"  {task.index:3d}  {task.name}")
    return 0


def _default_out(args: argparse.Namespace) -> Path:
    policy = args.policy.replace(":", "-").replace(".", "-")
    variant = f"_{args.selector}-{args.rollback}" if args.selector else ""
    variant += "-repair" if args.selector and args.repair == "policy" else ""
    variant += "-by-value" if args.selector and args.rollback_target == "value" else ""
    variant += f"_{args.disturbance}" if args.disturbance != "none" else ""
    return Path("results") / f"{args.suite}_{policy}{variant}_seed{args.seed}.jsonl"


def _rollback_config(args: argparse.Namespace) -> RollbackConfig:
    return RollbackConfig(blocked_force=args.blocked_force, follow=args.follow)


def _recovery_options(args: argparse.Namespace, keep_trace: bool = False):
    if not args.selector:
        return None
    return RecoveryOptions(selector=args.selector, rollback=args.rollback, repair=args.repair,
                           repair_policy=args.repair_policy, repair_policy_options=args.repair_opt,
                           references=args.references,
                           critic=args.critic, selector_path=args.selector_path, rule_config=args.rule_config,
                           supervisor=SupervisorConfig(max_rollbacks=args.max_rollbacks, keep_trace=keep_trace,
                                                       target_score=args.rollback_target,
                                                       rollback=_rollback_config(args),
                                                       repair=RepairConfig(displaced=args.repair_displaced)))


def _interrupted(kept: str) -> int:
    """What a resumable command says on Ctrl-C (what it kept, how to go on), and its exit status."""
    print(f"\ninterrupted: {kept}; run the same command to resume", file=sys.stderr)
    return 130


def _cmd_eval(args: argparse.Namespace) -> int:
    from recovery.evaluation.runner import EvalConfig, evaluate
    from recovery.evaluation.stats import format_table, summarize

    config = EvalConfig(
        suite=args.suite, tasks=tuple(args.tasks), episodes=args.episodes, policy=args.policy,
        policy_options=args.policy_opt, seed=args.seed, disturbance=args.disturbance, recovery=_recovery_options(args),
        workers=args.workers, out=args.out or _default_out(args), video_dir=args.video, max_steps=args.max_steps,
        replan_every=args.replan_every, camera_size=args.camera_size, progress=not args.no_progress,
        ray_address=args.ray, record_world=args.record_world,
    )
    try:
        records = evaluate(config)
    except KeyboardInterrupt:
        return _interrupted(f"finished episodes are kept in {config.out}")
    table = format_table(summarize(records))
    summary_path = config.out.with_suffix(".summary.md")
    summary_path.write_text(table + "\n")
    print(table)
    print(f"\nresults: {config.out}\nsummary: {summary_path}")
    return 0


def _cmd_serve_policy(args: argparse.Namespace) -> int:
    from vla_wrappers.openpi.server import PolicyServer
    from vla_wrappers.registry import make_policy

    policy = make_policy(args.policy, None, args.policy_opt)
    server = PolicyServer(policy, metadata={"policy": args.policy}).build(args.host, args.port)
    print(f"serving {args.policy} on ws://{args.host}:{args.port} (health: http://{args.host}:{args.port}/healthz)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        policy.close()
    return 0


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


class _KeyValues(argparse.Action):
    """Collects repeated KEY=VALUE options into a dict."""

    def __call__(self, parser, namespace, value, option_string=None):
        options = dict(getattr(namespace, self.dest) or {})
        options[value[0]] = value[1]
        setattr(namespace, self.dest, options)


def _add_policy_args(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--policy", default=default,
                        help=f"registered policy (see `recovery policies`) or module:Class (default {default})")
    parser.add_argument("--policy-opt", type=_key_value, action=_KeyValues, default={}, metavar="KEY=VALUE",
                        help="policy setting, repeatable (e.g. openpi: host=10.0.0.2 port=8000 timeout_s=5)")


def _add_recovery_args(parser: argparse.ArgumentParser, selector_default: str | None,
                       disturbance_default: str, choose_selector: bool = True, choose_repair: bool = True,
                       several_disturbances: bool = False) -> None:
    """The supervisor's settings; ``choose_selector`` False where the selector is the one being trained,
    ``choose_repair`` False where repairs do not run yet (the selector's training environment),
    ``several_disturbances`` where each disturbed episode draws one of several (training)."""
    rec = parser.add_argument_group("recovery" + ("" if selector_default else " (the supervisor; off unless "
                                                                            "--selector is given)"))
    if choose_selector:
        rec.add_argument("--selector", choices=[*SELECTORS, "oracle", "oracle_repair"], default=selector_default,
                         help="mode selector; 'none' = supervisor that never intervenes (the baseline with "
                         "identical bookkeeping); 'rule' = thresholds on execution quality, its drop and the tracking "
                         "error (calibrated per suite and policy); 'ppo' = a selector "
                         "trained with `recovery train-selector` (see --selector-path); 'oracle' = rolls back once "
                         "right after the disturbance, which it is told of (a simulation-only upper bound on "
                         "detection); 'oracle_repair' = the same with a REPAIR (collect-repairs runs it)")
        rec.add_argument("--selector-path", type=Path, metavar="FILE",
                         help="the ppo selector's checkpoint (default: the shipped one of the suite)")
        rec.add_argument("--rule-config", type=Path, metavar="FILE",
                         help="the rule selector's thresholds, from `recovery calibrate-rule` (default: the shipped "
                         "calibration of the suite and policy, else the built-in defaults)")
    rec.add_argument("--rollback", choices=ROLLBACKS, default=RecoveryOptions.rollback,
                     help="physical: drive the arm back (what a real arm can do, default); snapshot: restore the "
                     "simulator (simulation-only upper bound)")
    if choose_repair:
        rec.add_argument("--repair", choices=REPAIRS, default=RecoveryOptions.repair,
                         help="policy: a REPAIR (also a RESET, and a RETRY whose target's world a disturbance changed: "
                         "an object moved, or the hand lost what it held) runs a goal-conditioned repair policy that "
                         "puts the world back as the remembered state had it, then hands back to the base policy; "
                         "rollback: every recovery only drives the arm back (default %(default)s)")
        rec.add_argument("--repair-policy", default=RecoveryOptions.repair_policy,
                         help="the repair policy: 'repair' = the learned one shipped for the suite (`recovery "
                         "train-repair` makes your own), or module:Class (default %(default)s)")
        rec.add_argument("--repair-opt", type=_key_value, action=_KeyValues, default={}, metavar="KEY=VALUE",
                         help="repair-policy setting, repeatable (e.g. checkpoint=checkpoints/repair/SUITE.pt)")
        rec.add_argument("--repair-displaced", type=float, default=RepairConfig.displaced, metavar="M",
                         help="a repair puts back a named object moved further than this many metres from where the "
                         "remembered state had it; a larger value (e.g. 1) leaves displaced objects to the base policy "
                         "and repairs only dropped and knocked-over ones (default %(default)s)")
    rec.add_argument("--references", type=Path, default=SHIPPED_REFERENCES,
                     help="reference trajectories of the global quality metric (default: the shipped ones for "
                     "libero_object / libero_spatial / libero_goal; `recovery build-references` makes your own)")
    rec.add_argument("--critic", type=Path, help="value critic (default: the shipped one for the suite, if any)")
    rec.add_argument("--rollback-target", choices=TARGET_SCORES, default=SupervisorConfig.target_score,
                     help="what ranks the remembered states a recovery may go back to: the execution-quality "
                     "metric, or the value critic's V (reads --critic; default %(default)s)")
    rec.add_argument("--max-rollbacks", type=int, default=SupervisorConfig.max_rollbacks,
                     help="recovery budget per episode (default %(default)s)")
    rec.add_argument("--blocked-force", type=float, default=RollbackConfig.blocked_force, metavar="N",
                     help="a physical rollback pressing on something this hard (newtons) without its hand coming "
                     f"closer for {RollbackConfig.blocked_steps} steps backs off upward and hands over, unreached; "
                     "0: it presses on until its budget is spent, as before 2026-12-07 (default %(default)s)")
    rec.add_argument("--follow", type=float, default=RollbackConfig.follow, metavar="M",
                     help="a physical rollback whose target had the hand over an object (within M metres of it, "
                     f"{RollbackConfig.follow_over} m of its origin sideways) that has moved since (more than "
                     f"{RollbackConfig.follow_moved} m, not knocked over) goes to where the hand was against the object, "
                     "over it and down in straight lines; 0: to the remembered joints, as before 2026-12-08 "
                     "(default %(default)s)")
    several = ({"nargs": "+", "default": [disturbance_default]} if several_disturbances
               else {"default": disturbance_default})
    rec.add_argument("--disturbance", choices=DISTURBANCES, **several,
                     help="action_noise: the 5-step burst of magnitude 3.0 (see sim.disturbances for the others; "
                     + ("several: each disturbed episode draws one of them; " if several_disturbances else "")
                     + "default %(default)s)")


PAIRED_HELP = """

Paired statistics: two variants that ran the same episodes (suite, task, init state, seed) under the
same disturbance are compared episode by episode, for each pair of such variants (A the earlier
column) and suite: B wins (B succeeded where A failed), B losses (the reverse), ties (both ok, both
fail) and the exact two-sided McNemar p-value, a binomial test on wins against losses: the chance of
a split at least this uneven if A and B were equally good (1 when none differ). Pairing cancels what
the layout and seed do to both variants alike, so it tells smaller differences apart than two
separate success rates do."""


def _add_list_differing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list-differing", action="store_true",
                        help="also list, per pair of variants, the episodes one solved and the other did not "
                        "(task, init, seed, which succeeded, steps and rollbacks of each): the ones to replay")


def _cmd_policies(args: argparse.Namespace) -> int:
    from vla_wrappers.registry import POLICIES

    for name, path in sorted(POLICIES.items()):
        print(f"{name:10s} {path}")
    return 0


def _cmd_collect_demos(args: argparse.Namespace) -> int:
    from recovery.pipelines.collect_demos import DemoConfig, collect_demos

    counts = collect_demos(DemoConfig(
        suite=args.suite, tasks=tuple(args.tasks), demos_per_task=args.demos, policy=args.policy, seed=args.seed,
        from_init_states=args.from_init_states, disturbance=args.disturbance, workers=args.workers,
        out_dir=args.out, images=args.images,
        progress=not args.no_progress,
    ))
    for name, count in counts.items():
        print(f"{count:3d} demos  {name}")
    print(f"written under {args.out / args.suite}")
    return 0


def _fit(args: argparse.Namespace, train, data: Path, out: Path, evaluate: str) -> int:
    """train-policy and train-repair: one network, one training, two kinds of demonstrations."""
    from recovery.pipelines.train_policy import TrainConfig
    from vla_wrappers.embedded.model import NetConfig

    checkpoint = train(TrainConfig(
        suite=args.suite, demos_dir=data, out=out, epochs=args.epochs, seed=args.seed, device=args.device,
        task_objects=args.task_objects, net=NetConfig(horizon=args.horizon, hidden=args.hidden),
        progress=not args.no_progress,
    ))
    t = checkpoint.training
    print(f"{out}: {t['train_demos']} train / {t['val_demos']} val demonstrations, {t['samples']} samples, "
          f"{t['epochs']} epochs in {t['minutes']} min on {t['device']}; final {t['final']}")
    print(f"evaluate: recovery eval --suite {args.suite} --policy embedded {evaluate}={out}")
    return 0


def _cmd_train_policy(args: argparse.Namespace) -> int:
    from recovery.pipelines.train_policy import train

    return _fit(args, train, args.demos, args.out or Path("checkpoints") / f"embedded_{args.suite}.pt",
                "--policy-opt checkpoint")


def _cmd_collect_repairs(args: argparse.Namespace) -> int:
    from recovery.pipelines.collect_repairs import RepairCollectConfig, collect_repairs

    counts = collect_repairs(RepairCollectConfig(
        suite=args.suite, tasks=tuple(args.tasks), episodes=args.episodes, disturbances=tuple(args.disturbances),
        policy=args.policy, seed=args.seed, workers=args.workers, out_dir=args.out, progress=not args.no_progress,
    ))
    for name, count in counts.items():
        print(f"{count:3d} repairs  {name}")
    print(f"written under {args.out / args.suite}; train: recovery train-repair --suite {args.suite} --repairs {args.out}")
    return 0


def _cmd_train_repair(args: argparse.Namespace) -> int:
    from recovery.pipelines.train_repair import train_repair

    return _fit(args, train_repair, args.repairs, args.out or Path("checkpoints") / "repair" / f"{args.suite}.pt",
                "--selector rule --repair policy --repair-opt checkpoint")


def _cmd_build_references(args: argparse.Namespace) -> int:
    from recovery.pipelines.build_references import build_references

    counts = build_references(args.demos, args.suite, args.references)
    for name, count in counts.items():
        print(f"{count:3d} references  {name}")
    print(f"written under {args.references / args.suite}")
    return 0 if all(counts.values()) else 1


def _cmd_train_critic(args: argparse.Namespace) -> int:
    import json

    from recovery.pipelines.train_critic import CriticTrainConfig, train_critic

    out = args.out or Path("checkpoints") / "critics" / f"{args.suite}.pt"
    _, report = train_critic(CriticTrainConfig(
        suite=args.suite, policy=args.policy, episodes_per_task=args.episodes, seed=args.seed,
        workers=args.workers, data_dir=args.data, out=out, hidden=args.hidden, task_objects=args.task_objects,
        progress=not args.no_progress,
    ))
    print(json.dumps(report, indent=2))
    print(f"critic: {out}\nreport: {out.with_suffix('.report.json')}")
    return 0


def _cmd_calibrate_rule(args: argparse.Namespace) -> int:
    import json

    from recovery.pipelines.calibrate_rule import CalibrationConfig, calibrate
    from recovery.supervision.selectors import RuleConfig

    config = CalibrationConfig(suite=args.suite, policy=args.policy, episodes_per_task=args.episodes, seed=args.seed,
                               false_alarm=args.false_alarm, disturbance=args.disturbance,
                               references=args.references, workers=args.workers,
                               data_dir=args.data, out=args.out, progress=not args.no_progress,
                               base=RuleConfig(retry_before_push=args.retry_before_push))
    _, report = calibrate(config)
    print(json.dumps(report, indent=2))
    print(f"thresholds: {report['out']}\nuse them: recovery eval --suite {args.suite} --policy {args.policy} "
          f"--selector rule --rule-config {report['out']}")
    return 0


def _selector_env(args: argparse.Namespace, reward: RewardConfig | None = None) -> SelectorEnvConfig:
    """The selector's environment (``recovery.learning.env``) as train-selector and improve-selector set it."""
    from recovery.learning.env import RewardConfig, SelectorEnvConfig
    from recovery.supervision.build import load_rule_config

    return SelectorEnvConfig(suite=args.suite, tasks=tuple(args.tasks), policy=args.policy,
                             policy_options=args.policy_opt, disturbances=tuple(args.disturbance),
                             disturbed_share=args.disturbed_share, rollback=args.rollback, references=args.references,
                             critic=args.critic, max_steps=args.max_steps,
                             rule=load_rule_config(args.rule_config) if args.rule_config else None,
                             supervisor=SupervisorConfig(max_rollbacks=args.max_rollbacks,
                                                         target_score=args.rollback_target,
                                                         rollback=_rollback_config(args)),
                             reward=reward or RewardConfig())


def _cmd_train_selector(args: argparse.Namespace) -> int:
    from recovery.learning.env import RewardConfig
    from recovery.learning.train import PPOConfig, TrainSelectorConfig, train_selector
    from recovery.learning.warm_start import WarmStartConfig

    env = _selector_env(args, RewardConfig(**dict(zip(("retry", "repair", "reset"), args.mode_costs)),
                                           counterfactual=args.counterfactual))
    config = TrainSelectorConfig(
        env=env, ppo=PPOConfig(n_steps=args.n_steps, ent_coef=args.ent_coef, target_kl=args.target_kl,
                               gamma=args.gamma),
        warm_start=WarmStartConfig(teacher=args.teacher, rule_teaches=tuple(args.rule_teaches),
                                   decisions=args.warm_start, teacher_data=tuple(args.teacher_data)),
        decisions=args.decisions, value_warmup=args.value_warmup, value_warmup_lr=args.value_warmup_lr,
        baseline=args.baseline,
        envs=args.envs, seed=args.seed,
        out=args.out or Path("selectors") / args.suite, checkpoint_every=args.checkpoint_every,
        eval_every=args.eval_every, eval_episodes=args.eval_episodes, device=args.device, ray_address=args.ray,
        progress=not args.no_progress,
    )
    try:
        final = train_selector(config)
    except KeyboardInterrupt:
        return _interrupted(f"{config.out / 'checkpoint.zip'} holds the last checkpoint")
    print(f"selector: {final}\ncurve: {config.out / 'learning_curve.png'}\nthroughput: {config.out / 'throughput.json'}")
    print(f"evaluate: recovery eval --suite {args.suite} --policy {args.policy} --selector ppo --selector-path {final}")
    return 0


def _cmd_plot_episode(args: argparse.Namespace) -> int:
    from recovery.evaluation.plot import plot_episode
    from recovery.evaluation.results import EpisodeSpec
    from recovery.evaluation.runner import EpisodeWorker, EvalConfig
    from sim.tasks import resolve_task

    task = resolve_task(args.suite, args.tasks[0] if args.tasks else 0)
    config = EvalConfig(suite=args.suite, policy=args.policy, policy_options=args.policy_opt,
                        disturbance=args.disturbance, recovery=_recovery_options(args, keep_trace=True))
    spec = EpisodeSpec(task.suite, task.index, args.init, args.seed, args.policy, selector=args.selector,
                       disturbance=args.disturbance, rollback=args.rollback, repair=args.repair)
    worker = EpisodeWorker(config)
    record = worker.run(spec)
    worker.close()
    if record["error"]:
        print(record["error"], file=sys.stderr)
        return 1
    print(f"{'success' if record['success'] else 'failure'} in {record['steps']} steps; recovery: "
          f"{ {k: v for k, v in record['recovery'].items() if k != 'trace'} }")
    print(f"plot: {plot_episode(record, args.out)}")
    return 0


def _with_paired(table: str, records: list[dict], list_differing: bool) -> str:
    """The table, then the paired statistics and (asked for) the differing episodes, where there are any."""
    from recovery.evaluation.stats import differing_episodes, paired_table

    parts = [table, paired_table(records), differing_episodes(records) if list_differing else ""]
    return "\n\n".join(part for part in parts if part)


def _emit(report: str, out: Path | None) -> int:
    """Write ``report`` to ``out`` (when given), then print it: a reader that closes the pipe early
    (``| head``) must not cost the file."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n")
    print(report)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from recovery.evaluation.stats import comparison_table, load_variants

    records = load_variants(args.files)
    report = _with_paired(comparison_table(records), records, args.list_differing)
    return _emit(report, args.out)


def _cmd_summarize(args: argparse.Namespace) -> int:
    from recovery.evaluation.stats import format_table, load_variants, summarize

    records = load_variants(args.files)
    print(_with_paired(format_table(summarize(records)), records, args.list_differing))
    return 0


def _cmd_taxonomy(args: argparse.Namespace) -> int:
    from recovery.evaluation.results import ResultsFile
    from recovery.evaluation.taxonomy import MissingWorldError, taxonomy_report

    try:
        report = taxonomy_report(ResultsFile(args.physical).load(), ResultsFile(args.snapshot).load())
    except MissingWorldError as exc:
        print(f"recovery taxonomy: error: {exc}", file=sys.stderr)
        return 2
    return _emit(report, args.out)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from recovery.evaluation.reproduce import reproduce, reproduction_report
    from recovery.evaluation.results import ResultsFile

    live = ResultsFile(args.live).load()
    result = reproduce(live, [r for path in args.published for r in ResultsFile(path).load()])
    print(reproduction_report(result))
    return 0 if result.ok else 1


def _cmd_ros(args: argparse.Namespace) -> int:
    from ros_nodes.launch_spec import LaunchSpecError
    from ros_nodes.up import up  # lazy: rclpy loads only in the node processes

    try:
        return up(args.params)
    except LaunchSpecError as exc:
        print(f"recovery ros up: error: {exc}", file=sys.stderr)
        return 2


def _eval_options(ev: argparse.ArgumentParser) -> None:
    from recovery.evaluation.runner import EvalConfig

    ev.add_argument("--suite", required=True, help="e.g. libero_object, libero_spatial, libero_goal, libero_10, libero_90")
    ev.add_argument("--tasks", nargs="*", default=[], help="task indices or names (default: all tasks of the suite)")
    ev.add_argument("--episodes", type=int, default=EvalConfig.episodes,
                    help="episodes per task, init states 0..N-1 (default %(default)s)")
    _add_policy_args(ev, EvalConfig.policy)
    ev.add_argument("--seed", type=int, default=EvalConfig.seed, help="environment seed before every reset "
                    "(default %(default)s)")
    ev.add_argument("--workers", type=int, default=EvalConfig.workers,
                    help="parallel simulator processes (default %(default)s)")
    ev.add_argument("--out", type=Path, help="results JSONL (default results/SUITE_POLICY_seedSEED.jsonl)")
    ev.add_argument("--video", type=Path, metavar="DIR", help="write one MP4 per episode into DIR (renders cameras)")
    ev.add_argument("--max-steps", type=int, help="override the suite's standard step budget")
    ev.add_argument("--replan-every", type=int, default=EvalConfig.replan_every,
                    help="actions executed per policy chunk (default %(default)s)")
    ev.add_argument("--camera-size", type=int, default=EvalConfig.camera_size,
                    help="camera resolution when images are needed (default %(default)s)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("--record-world", action="store_true",
                    help="record in each result what happened to the objects around each rollback (input of "
                    "`recovery taxonomy`)")
    ev.add_argument("--ray", metavar="ADDRESS", help="shard episodes over a Ray cluster (HOST:PORT, 'auto' to join the "
                    "local `ray start`, 'local' for a fresh one); --workers Ray actors, one CPU each")
    _add_recovery_args(ev, selector_default=None, disturbance_default=EvalConfig.disturbance)


def _collect_demos_options(cd: argparse.ArgumentParser) -> None:
    from recovery.pipelines.collect_demos import DemoConfig

    cd.add_argument("--suite", required=True)
    cd.add_argument("--tasks", nargs="*", default=[], help="task indices or names (default: all)")
    cd.add_argument("--demos", type=int, default=DemoConfig.demos_per_task,
                    help="attempts per task (default %(default)s); failures are dropped")
    cd.add_argument("--policy", default=DemoConfig.policy, help="demonstrator (default %(default)s)")
    cd.add_argument("--seed", type=int, default=DemoConfig.seed, help="seed of layout 0 (default %(default)s)")
    cd.add_argument("--from-init-states", action="store_true", help="use the fixed init states 0..N-1 instead")
    cd.add_argument("--disturbance", default=DemoConfig.disturbance,
                    help="execution noise while recording (default %(default)s: DART; 'none' for clean runs)")
    cd.add_argument("--workers", type=int, default=DemoConfig.workers)
    cd.add_argument("--out", type=Path, default=DemoConfig.out_dir, help="output directory (default %(default)s)")
    cd.add_argument("--images", action="store_true", help="also record both camera images (slow)")
    cd.add_argument("--no-progress", action="store_true")


def _training_options(parser: argparse.ArgumentParser) -> None:
    """What train-policy and train-repair share: the network and its training."""
    from recovery.pipelines.train_policy import TrainConfig
    from vla_wrappers.embedded.model import NetConfig

    parser.add_argument("--epochs", type=int, default=TrainConfig.epochs, help="default %(default)s")
    parser.add_argument("--horizon", type=int, default=NetConfig.horizon,
                        help="actions per predicted chunk (default %(default)s)")
    parser.add_argument("--hidden", type=int, default=NetConfig.hidden, help="MLP width (default %(default)s)")
    parser.add_argument("--task-objects", action="store_true",
                        help="each task sees only the objects of interest its BDDL file names, not the "
                             "distractors (libero_10: seven or more objects on the table)")
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--device", default=TrainConfig.device,
                        help="cpu, cuda or auto (default %(default)s: CUDA if present)")
    parser.add_argument("--no-progress", action="store_true")


def _train_policy_options(tp: argparse.ArgumentParser) -> None:
    from recovery.pipelines.train_policy import TrainConfig

    tp.add_argument("--suite", required=True)
    tp.add_argument("--demos", type=Path, default=TrainConfig.demos_dir,
                    help="demonstrations directory (default %(default)s)")
    tp.add_argument("--out", type=Path, help="checkpoint path (default checkpoints/embedded_SUITE.pt)")
    _training_options(tp)


def _collect_repairs_options(cr: argparse.ArgumentParser) -> None:
    from recovery.pipelines.collect_repairs import RepairCollectConfig

    cr.add_argument("--suite", required=True)
    cr.add_argument("--tasks", nargs="*", default=[], help="task indices or names (default: all)")
    cr.add_argument("--episodes", type=int, default=RepairCollectConfig.episodes,
                    help="disturbed episodes per task and disturbance (default %(default)s)")
    cr.add_argument("--disturbances", nargs="+", choices=DISTURBANCES[1:], default=list(RepairCollectConfig.disturbances),
                    help="default: %(default)s")
    cr.add_argument("--policy", default=RepairCollectConfig.policy,
                    help="the base policy whose disturbed episodes are repaired (default %(default)s)")
    cr.add_argument("--seed", type=int, default=RepairCollectConfig.seed, help="layout seed (default %(default)s)")
    cr.add_argument("--workers", type=int, default=RepairCollectConfig.workers)
    cr.add_argument("--out", type=Path, default=RepairCollectConfig.out_dir, help="default %(default)s")
    cr.add_argument("--no-progress", action="store_true")


def _train_repair_options(tr: argparse.ArgumentParser) -> None:
    tr.add_argument("--suite", required=True)
    tr.add_argument("--repairs", type=Path, default=Path("repairs"),
                    help="repair demonstrations of `recovery collect-repairs` (default %(default)s)")
    tr.add_argument("--out", type=Path, help="checkpoint path (default checkpoints/repair/SUITE.pt; copy it into "
                    "vla_wrappers/repair/checkpoints/ to ship it)")
    _training_options(tr)


def _build_references_options(br: argparse.ArgumentParser) -> None:
    br.add_argument("--suite", required=True)
    br.add_argument("--demos", type=Path, default=Path("demos"), help="demonstrations directory (default %(default)s)")
    br.add_argument("--references", type=Path, default=Path("references"), help="output directory (default "
                    "%(default)s; pass it to --references, or copy it over critics/references to ship it)")


def _train_critic_options(tc: argparse.ArgumentParser) -> None:
    from recovery.pipelines.train_critic import CriticTrainConfig

    tc.add_argument("--suite", required=True)
    tc.add_argument("--policy", default=CriticTrainConfig.policy)
    tc.add_argument("--episodes", type=int, default=CriticTrainConfig.episodes_per_task,
                    help="rollouts per task and condition (default %(default)s)")
    tc.add_argument("--seed", type=int, default=CriticTrainConfig.seed)
    tc.add_argument("--workers", type=int, default=CriticTrainConfig.workers)
    tc.add_argument("--data", type=Path, default=CriticTrainConfig.data_dir, help="rollout store (resumable)")
    tc.add_argument("--out", type=Path, help="critic checkpoint (default checkpoints/critics/SUITE.pt; use it with "
                    "--critic, or copy it into critics/checkpoints/ to ship it)")
    tc.add_argument("--hidden", type=int, default=CriticTrainConfig.hidden,
                    help="width of V(s)'s hidden layers (default %(default)s: it runs every step)")
    tc.add_argument("--task-objects", action=argparse.BooleanOptionalAction,
                    default=CriticTrainConfig.task_objects,
                    help="each task sees only the objects of interest its BDDL file names, in slots the tasks share "
                         "(the object it picks up, where it goes), not the distractors (default on: failure "
                         "prediction after a burst 0.66 -> 0.72 AUROC on libero_spatial, 0.89 -> 0.93 on libero_object)")
    tc.add_argument("--no-progress", action="store_true")


def _calibrate_rule_options(cr: argparse.ArgumentParser) -> None:
    from recovery.pipelines.calibrate_rule import CalibrationConfig

    cr.add_argument("--suite", required=True)
    cr.add_argument("--policy", default=CalibrationConfig.policy)
    cr.add_argument("--episodes", type=int, default=CalibrationConfig.episodes_per_task,
                    help="sampled layouts per task (default %(default)s)")
    cr.add_argument("--seed", type=int, default=CalibrationConfig.seed, help="seed of layout 0 (default %(default)s)")
    cr.add_argument("--false-alarm", type=float, default=CalibrationConfig.false_alarm,
                    help="share of successful episodes on which the rule may fire (default %(default)s)")
    cr.add_argument("--disturbance", default=CalibrationConfig.disturbance, help="split the false-alarm budget among "
                    "the triggers so that they catch the most of this disturbance soon after its onset, on the same "
                    "layouts, and report how many ('none': one share each; default %(default)s)")
    cr.add_argument("--retry-before-push", action="store_true", help="the written rule sends a rollback the tracking "
                    "error triggered back to before the push began (RuleConfig.retry_before_push; not calibrated: "
                    "the shipped libero_10 and libero_spatial rules have it)")
    cr.add_argument("--references", type=Path, default=CalibrationConfig.references)
    cr.add_argument("--workers", type=int, default=CalibrationConfig.workers)
    cr.add_argument("--data", type=Path, default=CalibrationConfig.data_dir, help="rollout store (resumable; "
                    "delete SUITE/rule_calibration.jsonl in it after rebuilding references)")
    cr.add_argument("--out", type=Path, help="thresholds file (default rules/SUITE_POLICY.rule.json; pass it to "
                    "`recovery eval --selector rule --rule-config FILE`, or copy it into critics/checkpoints/ to ship "
                    "it as the suite's default)")
    cr.add_argument("--no-progress", action="store_true")


def _cmd_improve_selector(args: argparse.Namespace) -> int:
    from recovery.pipelines.improve_selector import ImproveConfig, improve_selector

    config = ImproveConfig(env=_selector_env(args), selector=args.selector_path, episodes=args.episodes,
                           window=args.window, envs=args.envs, seed=args.seed, epochs=args.epochs,
                           decisive_weight=args.decisive_weight, device=args.device, out=args.out)
    try:
        final = improve_selector(config)
    except KeyboardInterrupt:
        return _interrupted(f"{config.run_dir / 'labels.npz'} holds the episodes labelled so far")
    print((config.run_dir / "report.json").read_text())
    print(f"selector: {final}\nevaluate: recovery eval --suite {args.suite} --policy {args.policy} --selector ppo "
          f"--selector-path {final} --disturbance {args.disturbance[0]}")
    return 0


def _improve_selector_options(im: argparse.ArgumentParser) -> None:
    from recovery.pipelines.improve_selector import ImproveConfig

    defaults = ImproveConfig()
    im.add_argument("--suite", required=True)
    im.add_argument("--tasks", nargs="*", default=[], help="task indices or names (default: all)")
    _add_policy_args(im, defaults.env.policy)
    im.add_argument("--selector-path", type=Path, metavar="FILE",
                    help="the selector to improve, from `recovery train-selector` (default: the suite's shipped one)")
    im.add_argument("--rule-config", type=Path, metavar="FILE",
                    help="the rule whose advice the selector's observation holds: the one it was trained with "
                    "(default: the suite's shipped calibration)")
    im.add_argument("--episodes", type=int, default=defaults.episodes,
                    help="labelled episodes over all environments (default %(default)s; more on a rerun adds to them)")
    im.add_argument("--window", type=int, default=defaults.window,
                    help="label the decisions of the first WINDOW steps after the burst ended (default %(default)s)")
    im.add_argument("--disturbed-share", type=float, default=defaults.env.disturbed_share,
                    help="share of disturbed episodes; only they hold labels (default %(default)s)")
    im.add_argument("--max-steps", type=int, help="override the suite's step budget per episode")
    im.add_argument("--envs", type=int, default=defaults.envs, help="parallel environments (default %(default)s)")
    im.add_argument("--epochs", type=int, default=defaults.epochs, help="fitting epochs (default %(default)s)")
    im.add_argument("--decisive-weight", type=float, default=defaults.decisive_weight,
                    help="weight of a decision whose RETRY changed the outcome, against one whose choice the "
                    "selector keeps (default %(default)s)")
    im.add_argument("--seed", type=int, default=defaults.seed)
    im.add_argument("--device", default=defaults.device, help="cpu, cuda or auto (default %(default)s)")
    im.add_argument("--out", type=Path, help="run directory (default selectors/SUITE_improved)")
    _add_recovery_args(im, selector_default="ppo", disturbance_default=defaults.env.disturbances[0],
                       choose_selector=False, choose_repair=False, several_disturbances=True)


def _train_selector_options(ts: argparse.ArgumentParser) -> None:
    from recovery.learning.env import COUNTERFACTUALS, RewardConfig, SelectorEnvConfig
    from recovery.learning.train import BASELINES, PPOConfig, TrainSelectorConfig
    from recovery.learning.warm_start import TEACHERS, WarmStartConfig

    ts.add_argument("--suite", required=True)
    ts.add_argument("--tasks", nargs="*", default=[], help="task indices or names (default: all)")
    _add_policy_args(ts, SelectorEnvConfig.policy)
    ts.add_argument("--decisions", type=int, default=TrainSelectorConfig.decisions,
                    help="total decisions over all environments (default %(default)s)")
    ts.add_argument("--warm-start", type=int, default=WarmStartConfig.decisions, metavar="DECISIONS",
                    help="decisions of the teacher cloned into the actor before PPO starts (default %(default)s; "
                    "0: start from a random actor)")
    ts.add_argument("--teacher", choices=TEACHERS, default=WarmStartConfig.teacher,
                    help="the warm start's teacher: rule = the rule selector (the suite's thresholds); oracle = the "
                    "simulation-only disturbance oracle, told when the burst ended (the clone learns to see it from "
                    "the selector's observation; default %(default)s)")
    ts.add_argument("--rule-teaches", nargs="+", default=[], choices=DISTURBANCES[1:], metavar="DISTURBANCE",
                    help="with --teacher oracle: disturbances whose episodes the rule teaches from the disturbance's "
                    "onset on, where it decides better than the oracle (libero_spatial's gripper_open: the rule "
                    "succeeds in 282 of 500 episodes, the oracle in 254)")
    ts.add_argument("--teacher-data", nargs="+", default=[], metavar="RUN_DIR",
                    help="clone the teacher decisions these earlier train-selector runs collected (their "
                    "warm_start.npz, joined: other seeds give other layouts, other --disturbance lists another "
                    "curriculum) instead of collecting; each must have run with this run's observation, teacher "
                    "and critic")
    ts.add_argument("--envs", type=int, default=TrainSelectorConfig.envs,
                    help="parallel environments (processes or Ray actors; default %(default)s)")
    ts.add_argument("--n-steps", type=int, default=PPOConfig.n_steps,
                    help="decisions per environment between PPO updates (default %(default)s)")
    ts.add_argument("--ent-coef", type=float, default=PPOConfig.ent_coef,
                    help="PPO's entropy bonus (default %(default)s, the source's; it pushes a selector that rarely "
                    "intervenes towards intervening more)")
    ts.add_argument("--gamma", type=float, default=PPOConfig.gamma,
                    help="PPO's discount per decision (default %(default)s, the source's). 0 judges each decision by "
                    "its own reward alone: with --counterfactual intervention that is what the recovery changed "
                    "against leaving the base policy alone from there, so the value head has only that to learn")
    ts.add_argument("--target-kl", type=float, default=PPOConfig.target_kl,
                    help="end an update's epochs early once the policy has moved this far from the one that collected "
                    "its rollouts (approximate KL; default: no limit, the source's)")
    ts.add_argument("--value-warmup", type=int, default=TrainSelectorConfig.value_warmup, metavar="DECISIONS",
                    help="updates fit the value head only, the actor frozen, until the selector has made DECISIONS "
                    "decisions (counting those of a checkpoint it starts from; the shipped selectors have made 0): "
                    "for a run that starts from a clone or changes the reward, whose value head has not learned the "
                    "return yet (default %(default)s)")
    ts.add_argument("--value-warmup-lr", type=float, metavar="LR",
                    help="learning rate of the --value-warmup updates (default: PPO's, 1e-4, which moves a value head "
                    "fitted to another return too slowly to catch up; e.g. 1e-3)")
    ts.add_argument("--baseline", choices=BASELINES, default=TrainSelectorConfig.baseline,
                    help="what PPO's advantages subtract: 'value', its value head (default), or 'none', each "
                    "decision's own discounted return as it is (REINFORCE's; nor are they normalised per batch); "
                    "with --gamma 0 and --counterfactual intervention a recovery is then judged by its cost and what "
                    "it changed alone, not against a value head that cannot predict the rare payments")
    ts.add_argument("--max-steps", type=int, help="override the suite's step budget per episode")
    ts.add_argument("--disturbed-share", type=float, default=SelectorEnvConfig.disturbed_share,
                    help="share of disturbed episodes (default %(default)s)")
    costs = RewardConfig()
    ts.add_argument("--mode-costs", type=float, nargs=3, metavar=("RETRY", "REPAIR", "RESET"),
                    default=[costs.retry, costs.repair, costs.reset],
                    help="reward of choosing each recovery mode, on top of +1 success / -1 failure (default "
                    "%(default)s, the source's; a recovery also spends the episode's steps, which costs it anyway)")
    ts.add_argument("--rule-config", type=Path, metavar="FILE",
                    help="the rule whose advice the observation holds (and the teacher of --teacher rule), from "
                    "`recovery calibrate-rule` (default: the suite's shipped calibration); a resumed checkpoint "
                    "must be given the rule it was trained with")
    ts.add_argument("--counterfactual", nargs="?", const="episode", choices=COUNTERFACTUALS,
                    help="pay outcomes against the base policy's own: at the first decision that asks for a "
                    "recovery, the rest of the episode is also played out in simulation with no recovery, and the "
                    "episode scores the difference of the two outcomes (0 where the recovery changed nothing); the "
                    "same optimum with far less variance, for about one more rollout an intervened episode. "
                    "'intervention': also a play-out after each recovery, which is paid at once the difference "
                    "of the outcomes played alone after and before it (the same total, each recovery's own credit); "
                    "default without a value: %(const)s")
    ts.add_argument("--checkpoint-every", type=int, default=TrainSelectorConfig.checkpoint_every,
                    help="decisions between checkpoints (default %(default)s)")
    ts.add_argument("--eval-every", type=int, default=TrainSelectorConfig.eval_every,
                    help="decisions between evaluations (0: none; default %(default)s)")
    ts.add_argument("--eval-episodes", type=int, default=TrainSelectorConfig.eval_episodes)
    ts.add_argument("--seed", type=int, default=TrainSelectorConfig.seed)
    ts.add_argument("--device", default=TrainSelectorConfig.device,
                    help="cpu, cuda or auto (default %(default)s: CUDA if present)")
    ts.add_argument("--ray", metavar="ADDRESS", help="run the environments as Ray actors on this cluster")
    ts.add_argument("--out", type=Path, help="run directory (default selectors/SUITE)")
    ts.add_argument("--no-progress", action="store_true")
    _add_recovery_args(ts, selector_default="ppo", disturbance_default=SelectorEnvConfig.disturbances[0],
                       choose_selector=False, choose_repair=False, several_disturbances=True)


def _serve_policy_options(sp: argparse.ArgumentParser) -> None:
    _add_policy_args(sp, "zero")
    sp.add_argument("--host", default="0.0.0.0", help="interface to bind (default all)")
    sp.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")


def _plot_episode_options(pe: argparse.ArgumentParser) -> None:
    from recovery.evaluation.runner import EvalConfig

    pe.add_argument("--suite", required=True)
    pe.add_argument("--tasks", nargs="*", default=[], help="the task (index or name; default 0)")
    pe.add_argument("--init", type=int, default=0, help="init state index (default 0)")
    pe.add_argument("--seed", type=int, default=EvalConfig.seed)
    _add_policy_args(pe, "embedded")
    _add_recovery_args(pe, selector_default="rule", disturbance_default="action_noise")
    pe.add_argument("--out", type=Path, default=Path("results/episode_trace.png"))


def _compare_options(cp: argparse.ArgumentParser) -> None:
    cp.add_argument("files", nargs="+", type=Path, help="results files (JSONL, from recovery eval)")
    cp.add_argument("--out", type=Path, help="also write the report (Markdown) here")
    _add_list_differing(cp)


def _summarize_options(sm: argparse.ArgumentParser) -> None:
    sm.add_argument("files", nargs="+", type=Path, help="results files (JSONL, from recovery eval)")
    _add_list_differing(sm)


def _reproduce_options(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("live", type=Path, help="results file of the run to check (JSONL, from recovery eval)")
    rp.add_argument("published", nargs="+", type=Path, help="the published results files (e.g. reports/**/*.jsonl)")


def _taxonomy_options(tx: argparse.ArgumentParser) -> None:
    tx.add_argument("physical", type=Path, help="results of the physical rollback (recovery eval --record-world)")
    tx.add_argument("snapshot", type=Path, help="results of the snapshot rollback on the same episodes")
    tx.add_argument("--out", type=Path, help="also write the report (Markdown) here")


def _tasks_options(tasks: argparse.ArgumentParser) -> None:
    tasks.add_argument("--suite", help="suite to list (default: list the suites)")


# name: (handler, options, one-line help, description). A command's options are added only when it runs
# (they import the settings they take their defaults from), so `recovery --help` loads no simulator.
COMMANDS = {
    "tasks": (_cmd_tasks, _tasks_options, "list LIBERO suites, or the tasks of one suite", None),
    "eval": (_cmd_eval, _eval_options, "standard LIBERO evaluation (resumable)",
             "Standard LIBERO protocol: episode i starts from the task's fixed init state i after env.seed(SEED); "
             "10 wait steps with the dummy action; then up to the suite's step budget (spatial 220, object 280, goal "
             "300, libero_10 520, libero_90 400), rollback motion included; success from the environment. Each "
             "episode is appended to a JSONL file as it ends; rerunning the same command skips finished episodes."),
    "collect-demos": (_cmd_collect_demos, _collect_demos_options,
                      "record successful demonstrations (LIBERO-style HDF5, resumable)",
                      "Run a policy (the scripted expert by default) on N layouts per task and write the successful "
                      "episodes to DIR/SUITE/TASK_NAME.hdf5. Layout k is sampled with seed SEED+k from the task's "
                      "placement regions (never one of the fixed evaluation init states) unless --from-init-states. "
                      "Rerunning resumes; the same command writes the same demonstrations."),
    "train-policy": (_cmd_train_policy, _train_policy_options,
                     "train the embedded policy by behaviour cloning on demonstrations",
                     "Behaviour cloning of action chunks (state + privileged object poses + task one-hot -> H x 7 "
                     "actions) from the HDF5 demonstrations of `recovery collect-demos`. CPU in minutes."),
    "collect-repairs": (_cmd_collect_repairs, _collect_repairs_options,
                        "record the scripted corrector repairing disturbed episodes (resumable)",
                        "Run the base policy on sampled layouts (never the evaluation init states) under each "
                        "disturbance; right after it ends, the privileged scripted corrector repairs toward the target "
                        "the supervisor's memory gives (pick up what was dropped, set back what was moved, take the "
                        "arm back over the objects), its execution jittered (DART). Keeps the repairs that reached "
                        "their target."),
    "train-repair": (_cmd_train_repair, _train_repair_options, "train the goal-conditioned repair policy",
                     "Behaviour cloning of the corrector's action chunks from what a robot perceives (the state, the "
                     "object poses) and the repair target (the remembered grip pose, gripper, object to put back "
                     "and its place). CPU in minutes."),
    "build-references": (_cmd_build_references, _build_references_options,
                         "reference trajectories for the global quality metric",
                         "Take the successful demonstrations of `recovery collect-demos` (eef position + fingers per "
                         "step) as the reference trajectories of each task."),
    "train-critic": (_cmd_train_critic, _train_critic_options,
                     "train the value critic and risk head from base-policy rollouts",
                     "Roll the base policy out on sampled layouts (half under action noise), train V(s) on discounted "
                     "outcomes and the temporal value-risk head on V's traces, and report failure prediction (AUROC, "
                     "lead time) on held-out episodes."),
    "calibrate-rule": (_cmd_calibrate_rule, _calibrate_rule_options,
                       "set the rule selector's thresholds for a suite and policy",
                       "Run the policy with the never-intervening supervisor on sampled layouts (never the evaluation "
                       "init states) and pick the thresholds (low quality, quality drop, tracking error) that together "
                       "fire on at most FALSE_ALARM of its successful episodes. Execution quality is relative to the "
                       "references: a weak policy scores low even when it succeeds, so every suite and policy needs "
                       "its own. The tracking threshold is per task (a multiple of how far the task's arm strays in "
                       "its successes); the same layouts under DISTURBANCE decide how the budget is split among the "
                       "triggers and how many steps after the start the tracking error is not judged (an arm setting "
                       "off from rest lags its commands): the choice that catches the most disturbances."),
    "train-selector": (_cmd_train_selector, _train_selector_options,
                       "train the mode selector with PPO in simulation (resumable)",
                       "PPO (stable-baselines3; the source's lr 1e-4, gamma 0.99, clip 0.2, vf 0.1, entropy 0.01) over "
                       "parallel selector environments. One environment step is one decision every 5 control steps; "
                       "reward +1 success, -1 failure, -0.02 per decision, -0.1 / -0.3 / -0.5 per retry / repair / "
                       "reset. Episodes draw a task, a sampled layout (never an evaluation init state) and, on a share "
                       "of them, the disturbance. PPO starts from a clone of the rule selector (--warm-start). "
                       "Rerunning the same command resumes from OUT/checkpoint.zip."),
    "improve-selector": (_cmd_improve_selector, _improve_selector_options,
                         "improve a selector from RETRY outcomes played out in simulation (resumable)",
                         "Run the selector (greedy) on sampled layouts under the disturbance; at each decision of the "
                         "first WINDOW steps after the burst ended, play out in simulation what the base policy "
                         "reaches left alone and what it reaches after a RETRY there, and undo both. Then fit the "
                         "selector's actor to ask where the RETRY won the episode and not where it lost it, keeping "
                         "its own choices elsewhere. report.json says how often each happened and whether the "
                         "selector's probability of RETRY ranks the winning decisions above the rest, before and out "
                         "of fold (each episode judged by a fit on the others; AUROC). Rerunning the same command "
                         "with more --episodes labels the rest."),
    "serve-policy": (_cmd_serve_policy, _serve_policy_options, "serve a policy over the openpi websocket protocol",
                     "Serve one of our policies to remote clients (e.g. a robot) with the openpi protocol: msgpack "
                     "metadata frame, then msgpack observation -> {'actions': H x 7}. GET /healthz answers OK."),
    "policies": (_cmd_policies, None, "list the registered policies", None),
    "plot-episode": (_cmd_plot_episode, _plot_episode_options,
                     "run one supervised episode and plot its quality/value/risk traces", None),
    "compare": (_cmd_compare, _compare_options, "side-by-side success table of several evaluations, with paired "
                "statistics", "One column per variant (policy, selector/rollback, disturbance); only episodes "
                "present in every variant (same task, init state and seed) are compared. 'rb' = rollbacks. "
                "The same variant in two files (two versions of the code) makes two columns, each named "
                "by its file's place and path." + PAIRED_HELP),
    "reproduce": (_cmd_reproduce, _reproduce_options, "check that episodes reproduce published ones exactly",
                  "Compare every episode of a results file with the same episode (suite, task, init state, seed, "
                  "policy, selector, disturbance, rollback) in published results files: success, steps, rollbacks "
                  "and rollback steps must be equal. Exit 1 where any differs."),
    "taxonomy": (_cmd_taxonomy, _taxonomy_options, "why the physical rollback loses episodes the snapshot "
                 "rollback wins", "Classify every episode that succeeds with --rollback snapshot and fails with the "
                 "physical rollback by what the world looked like after the physical one: no rollback (refused "
                 "while holding), an object tipped, dropped or displaced, the arm short of its target, the gripper "
                 "reopened, out of time, or a restored world where the policy still fails; and the episodes that go the "
                 "other way, from the same world (a class as full both ways is the base policy's chance after any "
                 "restore)."),
    "summarize": (_cmd_summarize, _summarize_options, "success table (95%% Wilson intervals) of results files",
                  "One row per task and variant, then per suite and variant." + PAIRED_HELP),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command is listed; only ``command``'s options are added (None: every command's)."""
    parser = argparse.ArgumentParser(
        prog="recovery", description="Agentic recovery for VLA robot manipulation: evaluate, train, deploy.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (handler, options, summary, description) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=summary, description=description)
        if options and command in (None, name):
            options(command_parser)
        command_parser.set_defaults(func=handler)
    _add_ros_parser(sub)
    return parser


def _add_ros_parser(sub) -> None:
    ros = sub.add_parser("ros", help="ROS 2: start the supervisor and its companion nodes (pip install '.[ros]')")
    ros_sub = ros.add_subparsers(dest="ros_command", required=True, metavar="ROS_COMMAND")
    ros_up = ros_sub.add_parser(
        "up", help="start the nodes a parameter file lists, as processes (launch_ros not needed)",
        description="Start every node listed in the parameter file's `launch` section, each with that file's "
        "parameters, as ros2 launch does with launch/recovery.launch.py. Ctrl-C stops them all. "
        "Example: recovery ros up launch/sim.yaml",
    )
    ros_up.add_argument("params", type=Path, help="parameter file (e.g. launch/sim.yaml, launch/robot.yaml)")
    ros_up.set_defaults(func=_cmd_ros)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (RecoveryError, FileNotFoundError) as exc:  # a user error: say what is wrong, no traceback
        print(f"recovery {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
