"""``recovery train-critic`` end to end: real rollouts of the shipped embedded policy in LIBERO."""

from __future__ import annotations

import dataclasses

import pytest

from critics.value import ValueCritic
from recovery.pipelines.train_critic import CriticTrainConfig, train_critic


@pytest.mark.sim
def test_a_critic_is_trained_on_the_tasks_objects_by_role_and_the_store_serves_another_layout(tmp_path):
    config = CriticTrainConfig(suite="libero_object", episodes_per_task=1, data_dir=tmp_path / "data",
                               out=tmp_path / "task_objects.pt", epochs=2, progress=False)
    _, report = train_critic(config)  # one nominal and one disturbed rollout per task
    critic = ValueCritic.load(config.out)
    assert critic.layout.task_slots and critic.layout.slots == 2
    assert critic.layout.task_objects[0] == ("alphabet_soup_1", "basket_1")
    assert critic.training["task_objects"] and critic.training["episodes"] == 20
    assert report["heldout_failures"] + report["heldout_successes"] == 5
    assert {"auroc", "auroc_after_burst", "fires_on_failures"} <= set(report["value (1 - V)"])

    every_object = dataclasses.replace(config, task_objects=False, out=tmp_path / "every_object.pt")
    train_critic(every_object)  # the same 20 rollouts, not collected again
    assert ValueCritic.load(every_object.out).layout.slots == len(critic.layout.object_names) > 2
    assert len(list((tmp_path / "data" / "libero_object").glob("*.npz"))) == 20
