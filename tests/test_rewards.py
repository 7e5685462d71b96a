"""What a selector in training is paid (the counterfactual end reward) and which rule's advice a
resumed selector goes on reading. The counterfactual's play-out on LIBERO is in test_learning."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from recovery.learning.env import RewardConfig
from recovery.supervision.observation import ObservationLayout
from recovery.supervision.ppo import SelectorCheckpointError, check_advisor, selector_meta
from recovery.supervision.selectors import RuleConfig


@pytest.mark.parametrize("success, left_alone, plain, counterfactual", [
    (True, False, 1.0, 2.0),  # the recovery won the episode
    (False, True, -1.0, -2.0),  # it lost one the base policy would have won alone
    (True, True, 1.0, 0.0),  # it changed nothing
    (False, False, -1.0, 0.0),
    (True, None, 1.0, 0.0),  # no recovery was asked for: the outcome is the base policy's own
    (False, None, -1.0, 0.0),
])
def test_the_end_reward_is_the_outcome_or_its_difference_to_the_base_policy_alone(success, left_alone, plain,
                                                                                  counterfactual):
    assert RewardConfig().outcome(success, left_alone) == plain
    for paid in ("episode", "intervention"):  # "intervention": left_alone is played from after the last recovery
        assert RewardConfig(counterfactual=paid).outcome(success, left_alone) == counterfactual


def test_an_unknown_counterfactual_is_refused():
    with pytest.raises(ValueError, match="'episode', 'intervention'"):
        RewardConfig(counterfactual="decision")


def test_a_resumed_selector_must_be_advised_by_the_rule_it_was_trained_with():
    """A checkpoint written before the drop trigger existed reads the rule without it."""
    layout = ObservationLayout()
    meta = selector_meta(layout, None, RuleConfig())
    del meta["rule"]["retry_on_let_go"]
    check_advisor(meta, layout, Path("old.zip"), RuleConfig(retry_on_let_go=False))
    with pytest.raises(SelectorCheckpointError, match=r"old.zip .*'retry_on_let_go': False.*--rule-config"):
        check_advisor(meta, layout, Path("old.zip"), RuleConfig())
    with pytest.raises(SelectorCheckpointError, match="'quality_min': 0.5"):
        check_advisor(selector_meta(layout, None, RuleConfig()), layout, Path("new.zip"),
                      replace(RuleConfig(), quality_min=0.6))
