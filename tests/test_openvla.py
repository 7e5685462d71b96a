"""OpenVLA wrapper: the action contract by hand-computed values, then the whole policy on a tiny
offline test double, and on a real checkpoint when OPENVLA_CHECKPOINT names one."""

from __future__ import annotations

import os
import socket
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from vla_wrappers.base import PolicyConfigError, PolicyError
from vla_wrappers.openvla import action_tokens as at

VOCAB = 32000  # Llama-2: action tokens are 31744..31999
STATS = {"q01": np.array([-1.0, -0.5, 0.0]), "q99": np.array([1.0, 1.5, 1.0]), "mask": np.array([True, True, False])}


# --- the pure contract ----------------------------------------------------------------------------
def test_prompt_lowercases_the_instruction():
    assert at.prompt_for("Pick up the BLACK bowl") == (
        "In: What action should the robot take to pick up the black bowl?\nOut:"
    )


def test_empty_token_appended_once():
    assert at.with_empty_token([1, 512, 29901]) == [1, 512, 29901, 29871]
    assert at.with_empty_token([1, 512, 29871]) == [1, 512, 29871]


def test_bin_centers_are_midpoints_of_256_bins():
    centers = at.bin_centers()
    assert len(centers) == 255
    assert centers[0] == pytest.approx(-254 / 255)
    assert centers[127] == pytest.approx(0.0, abs=1e-12)
    assert centers[254] == pytest.approx(254 / 255)


def test_tokens_decode_to_bin_centres():
    # bin = vocab - id - 1, clipped to [0, 254]; centre(bin) = -1 + (2 bin + 1) / 255
    ids = [31999, 31872, 31871, 31745, 31744, 32010, 100]
    expected = [-254 / 255, 0.0, 2 / 255, 254 / 255, 254 / 255, -254 / 255, 254 / 255]
    np.testing.assert_allclose(at.tokens_to_normalized(ids, VOCAB), expected, atol=1e-12)


def test_vocab_size_removes_the_padding():
    padded = SimpleNamespace(text_config=SimpleNamespace(vocab_size=32064), pad_to_multiple_of=64)
    assert at.unpadded_vocab_size(padded) == 32000
    assert at.unpadded_vocab_size(SimpleNamespace(vocab_size=32000)) == 32000
    with pytest.raises(PolicyConfigError, match="vocab_size"):
        at.unpadded_vocab_size(SimpleNamespace())


def test_unnormalize_maps_masked_dims_to_quantiles_and_passes_the_rest():
    np.testing.assert_allclose(at.unnormalize(np.array([0.5, -1.0, 0.3]), STATS), [0.5, -0.5, 0.3])
    np.testing.assert_allclose(at.unnormalize(np.array([1.0, 1.0, -0.7]), STATS), [1.0, 1.5, -0.7])


def test_action_stats_default_mask_and_unknown_key():
    norm_stats = {"libero_goal": {"action": {"q01": [0.0, -2.0], "q99": [1.0, 2.0]}},
                  "bridge_orig": {"action": {"q01": [0.0, 0.0], "q99": [1.0, 1.0]}}}
    stats = at.action_stats(norm_stats, "libero_goal")
    np.testing.assert_array_equal(stats["mask"], [True, True])
    np.testing.assert_allclose(at.unnormalize(np.array([0.0, 0.5]), stats), [0.5, 1.0])
    with pytest.raises(PolicyConfigError, match=r"'libero_10'.*\['bridge_orig', 'libero_goal'\]"):
        at.action_stats(norm_stats, "libero_10")


def test_gripper_binarised_and_flipped_for_libero():
    action = np.array([[0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 0.9], [0.0] * 6 + [0.1], [0.0] * 6 + [1.0], [0.0] * 6 + [0.0]])
    out = at.to_libero_gripper(action)
    np.testing.assert_array_equal(out[:, -1], [-1.0, 1.0, -1.0, 1.0])  # OpenVLA 1 = open = LIBERO -1
    np.testing.assert_array_equal(out[:, :-1], action[:, :-1])
    assert action[0, -1] == 0.9  # input untouched


def test_image_resized_to_224_rgb():
    image = at.preprocess_image(np.zeros((128, 96, 3), np.uint8), center_crop=False)
    assert image.mode == "RGB" and image.size == (224, 224)
    with pytest.raises(ValueError, match="uint8"):
        at.preprocess_image(np.zeros((128, 128, 3), np.float32), center_crop=False)


def test_center_crop_keeps_the_middle_90_percent_of_the_area():
    ramp = np.tile(np.arange(224, dtype=np.uint8)[None, :, None], (224, 1, 3))  # pixel value = column
    np.testing.assert_array_equal(np.asarray(at.preprocess_image(ramp, center_crop=False)), ramp)
    cropped = np.asarray(at.preprocess_image(ramp, center_crop=True)).astype(int)
    # side = 224 sqrt(0.9) = 212.50, offset 5.75: column i samples 5.75 + (i + 0.5) 0.9487 - 0.5
    assert cropped.shape == (224, 224, 3)
    assert abs(cropped[100, 0, 0] - 5.72) <= 1
    assert abs(cropped[100, 223, 0] - 217.28) <= 1
    assert abs(cropped[100, 112, 0] - 111.97) <= 1


# --- the policy on the tiny test double -----------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    pytest.importorskip("transformers")
    from vla_wrappers.openvla.tiny import save_tiny_openvla

    return save_tiny_openvla(tmp_path_factory.mktemp("tiny-openvla"))


@pytest.fixture(scope="module")
def no_network():
    """Any connection attempt fails the test: the checkpoint must load offline."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket, "create_connection", refuse)
        yield


def make(checkpoint, **options):
    from vla_wrappers.registry import make_policy

    return make_policy("openvla", None, {"model_path": str(checkpoint), "device": "cpu", **options})


@pytest.fixture(scope="module")
def tiny_policy(tiny_checkpoint, no_network):
    policy = make(tiny_checkpoint, unnorm_key="libero_spatial")
    policy.reset("Put the bowl on the plate")
    return policy


def camera(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"agentview_image": rng.integers(0, 256, (128, 128, 3), dtype=np.uint8), "state": np.zeros(8)}


def expected_action(token_ids: list[int], q01: np.ndarray, q99: np.ndarray) -> np.ndarray:
    """The contract written out independently of action_tokens (gripper dim unmasked)."""
    bins = np.clip(VOCAB - np.array(token_ids) - 1, 0, 254)
    n = -1 + (2 * bins + 1) / 255
    action = 0.5 * (n + 1) * (q99 - q01) + q01
    action[6] = -1.0 if n[6] > 0.5 else 1.0
    return action


def test_tiny_policy_follows_the_action_contract(tiny_policy):
    from vla_wrappers.openvla.tiny import DEFAULT_NORM_STATS

    assert tiny_policy.needs_images and tiny_policy.vocab_size == VOCAB
    out = tiny_policy.infer(camera(0))
    tokens = out.info["action_token_ids"]
    assert out.actions.shape == (1, 7) and np.all(np.isfinite(out.actions))
    assert len(tokens) == 7 and all(VOCAB - 256 <= t < VOCAB for t in tokens)
    stats = DEFAULT_NORM_STATS["libero_spatial"]["action"]
    q01, q99 = np.array(stats["q01"]), np.array(stats["q99"])
    np.testing.assert_allclose(out.actions[0], expected_action(tokens, q01, q99), atol=1e-9)
    assert np.all(out.actions[0, :6] >= q01[:6]) and np.all(out.actions[0, :6] <= q99[:6])
    assert out.actions[0, 6] in (-1.0, 1.0)


def test_tiny_policy_is_deterministic_and_sees_the_image(tiny_policy):
    first, again = tiny_policy.infer(camera(0)), tiny_policy.infer(camera(0))
    np.testing.assert_array_equal(first.actions, again.actions)
    black = tiny_policy.infer({"agentview_image": np.zeros((128, 128, 3), np.uint8)})
    assert black.info["action_token_ids"] != first.info["action_token_ids"]  # openvla#346: image ignored


def test_decoding_matches_greedy_generate(tiny_policy):
    """Our cached decoding loop gives what transformers' own greedy search gives."""
    import torch

    tiny_policy.reset("open the drawer")
    obs = camera(1)
    inputs = tiny_policy.processor(tiny_policy._prompt, at.preprocess_image(obs["agentview_image"], True))
    ids = torch.tensor([at.with_empty_token(inputs["input_ids"][0].tolist())])
    generated = tiny_policy.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                           pixel_values=inputs["pixel_values"], max_new_tokens=7,
                                           do_sample=False, pad_token_id=0)
    assert generated[0, -7:].tolist() == tiny_policy.infer(obs).info["action_token_ids"]
    assert ids[0, -1] == at.EMPTY_TOKEN_ID and ids[0, 0] == 1


def test_tiny_policy_errors(tiny_checkpoint, tiny_policy, no_network):
    with pytest.raises(PolicyConfigError, match=r"'libero_90'.*\['libero_object', 'libero_spatial'\]"):
        make(tiny_checkpoint, unnorm_key="libero_90")
    with pytest.raises(PolicyConfigError, match="dtype"):
        make(tiny_checkpoint, dtype="int8")
    with pytest.raises(PolicyError, match="agentview_image"):
        tiny_policy.infer({"state": np.zeros(8)})
    fresh = make(tiny_checkpoint, unnorm_key="libero_object", center_crop="false")
    assert fresh.config.center_crop is False
    with pytest.raises(PolicyError, match="reset"):
        fresh.infer(camera(0))


def test_dtype_and_device_defaults():
    torch = pytest.importorskip("torch")
    from vla_wrappers.base import resolve_device
    from vla_wrappers.openvla.policy import _resolve_dtype

    assert _resolve_dtype(torch, "auto", "cuda") is torch.bfloat16
    assert _resolve_dtype(torch, "auto", "cpu") is torch.float32
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(PolicyConfigError, match="device"):
        resolve_device("tpu")


def test_transformers_5_named_in_the_error(monkeypatch):
    pytest.importorskip("transformers")
    from vla_wrappers.openvla.policy import _import_transformers

    transformers_5 = SimpleNamespace(__version__="5.0.0", AutoProcessor=object)  # no AutoModelForVision2Seq
    monkeypatch.setitem(sys.modules, "transformers", transformers_5)
    with pytest.raises(PolicyConfigError, match=r"AutoModelForVision2Seq.*5\.0\.0.*4\.57\.6"):
        _import_transformers()


# --- a real checkpoint, where one is at hand ------------------------------------------------------
@pytest.mark.skipif(not os.environ.get("OPENVLA_CHECKPOINT"), reason="set OPENVLA_CHECKPOINT to a checkpoint")
def test_real_checkpoint():
    pytest.importorskip("transformers")
    from vla_wrappers.registry import make_policy

    unnorm_key = os.environ.get("OPENVLA_UNNORM_KEY", "libero_spatial")
    policy = make_policy("openvla", None, {"model_path": os.environ["OPENVLA_CHECKPOINT"], "unnorm_key": unnorm_key})
    policy.reset("pick up the black bowl between the plate and the ramekin and place it on the plate")
    obs = {"agentview_image": np.asarray(Image.new("RGB", (256, 256), (120, 100, 80)))}
    out, again = policy.infer(obs), policy.infer(obs)
    tokens = out.info["action_token_ids"]
    assert out.actions.shape == (1, 7) and np.all(np.isfinite(out.actions))
    assert all(policy.vocab_size - 256 <= t < policy.vocab_size for t in tokens)
    q01, q99 = policy.stats["q01"], policy.stats["q99"]
    inside = (out.actions[0] >= q01 - 1e-6) & (out.actions[0] <= q99 + 1e-6)
    assert np.all(inside[policy.stats["mask"]])
    assert out.actions[0, 6] in (-1.0, 1.0)
    np.testing.assert_array_equal(out.actions, again.actions)
