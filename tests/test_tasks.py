import pytest

from sim.tasks import STANDARD_SUITES, UnknownTaskError, max_steps_for, resolve_task, resolve_tasks

pytestmark = pytest.mark.sim


def test_every_standard_suite_resolves_with_its_budget():
    budgets = {s: resolve_task(s, 0).max_steps for s in STANDARD_SUITES}
    assert budgets == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
    assert len(resolve_tasks("libero_90", None)) == 90
    assert len(resolve_tasks("libero_object", None)) == 10


def test_task_by_name_and_index_agree():
    by_index = resolve_task("libero_goal", 7)
    assert resolve_task("libero_goal", by_index.name) == by_index
    assert resolve_task("libero_goal", "7") == by_index
    assert by_index.bddl_path.endswith(".bddl")
    assert len(by_index.init_states()) == 50


def test_unknown_suite_lists_valid_names():
    with pytest.raises(UnknownTaskError) as err:
        resolve_task("libero_objects", 0)
    assert "libero_object" in str(err.value) and "did you mean" in str(err.value)


def test_unknown_task_lists_valid_tasks():
    with pytest.raises(UnknownTaskError, match="pick_up_the_alphabet_soup"):
        resolve_task("libero_object", "pick_up_the_moon")
    with pytest.raises(UnknownTaskError, match="valid 0..9"):
        resolve_task("libero_object", 10)


def test_perturbed_suites_inherit_the_base_budget():
    assert max_steps_for("libero_goal_swap") == 300
    assert max_steps_for("libero_10_with_mug") == 520
