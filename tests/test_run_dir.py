"""A training run's directory across package versions: a run started before a setting existed
resumes as long as the setting keeps its default, and is refused, naming it, otherwise."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from recovery.learning.run_dir import ResumeMismatchError, prepare_run
from recovery.learning.train import PPOConfig, TrainSelectorConfig


def _started_before_the_settings_existed(out) -> None:
    """config.json as a package without ``value_warmup`` and ``ppo.target_kl`` wrote it."""
    older = TrainSelectorConfig(out=out).identity()
    del older["value_warmup"], older["ppo"]["target_kl"]
    out.mkdir()
    (out / "config.json").write_text(json.dumps(older))
    (out / "checkpoint.zip").write_bytes(b"")


def test_a_run_started_before_a_setting_existed_resumes_with_its_default(tmp_path):
    out = tmp_path / "run"
    _started_before_the_settings_existed(out)
    config = TrainSelectorConfig(out=out)
    assert prepare_run(out, config.identity(), TrainSelectorConfig().identity()) == out / "checkpoint.zip"
    assert json.loads((out / "config.json").read_text()) == config.identity()  # the file now names them


@pytest.mark.parametrize("changed, named", [({"value_warmup": 2048}, "value_warmup"),
                                            ({"ppo": PPOConfig(target_kl=0.01)}, "ppo")])
def test_a_run_started_before_a_setting_existed_is_refused_with_another_value(tmp_path, changed, named):
    out = tmp_path / "run"
    _started_before_the_settings_existed(out)
    config = replace(TrainSelectorConfig(out=out), **changed)
    with pytest.raises(ResumeMismatchError, match=f"other settings \\({named} differ\\)"):
        prepare_run(out, config.identity(), TrainSelectorConfig().identity())
