"""OpenVLA's action contract without a model: prompt, image, token ids -> LIBERO actions.

Mirrors ``OpenVLAForActionPrediction.predict_action`` and the OpenVLA LIBERO evaluator, so that the
numbers we send to the robot are checked by unit tests rather than trusted to checkpoint code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from vla_wrappers.base import PolicyConfigError

N_BINS = 256  # uniform bins over [-1, 1]; the 255 midpoints are the decodable values
EMPTY_TOKEN_ID = 29871  # Llama-2's "" token that followed "Out:" in every training prompt
IMAGE_SIZE = 224
CROP_AREA = 0.9  # the random-crop scale used in training; the evaluator takes the centre crop


def prompt_for(instruction: str) -> str:
    return f"In: What action should the robot take to {instruction.lower()}?\nOut:"


def with_empty_token(input_ids: Sequence[int]) -> list[int]:
    """Append the empty token unless the prompt already ends with it, as at training time."""
    ids = list(input_ids)
    return ids if ids and ids[-1] == EMPTY_TOKEN_ID else ids + [EMPTY_TOKEN_ID]


def preprocess_image(image: np.ndarray, center_crop: bool, size: int = IMAGE_SIZE) -> Image.Image:
    """A (H, W, 3) uint8 camera image -> size x size RGB, optionally centre-cropped to 90 % area.

    Lanczos resize as in the evaluator; the crop is resized back bilinearly like
    ``tf.image.crop_and_resize``.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
    pil = Image.fromarray(image).convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
    if not center_crop:
        return pil
    side = np.sqrt(CROP_AREA) * size
    lo = (size - side) / 2
    return pil.resize((size, size), Image.Resampling.BILINEAR, box=(lo, lo, lo + side, lo + side))


def bin_centers(n_bins: int = N_BINS) -> np.ndarray:
    bins = np.linspace(-1.0, 1.0, n_bins)
    return (bins[:-1] + bins[1:]) / 2.0


def unpadded_vocab_size(config: Any) -> int:
    """The tokenizer's vocabulary size: action token k (0 = lowest bin) is ``vocab - 1 - k``.

    OpenVLA pads the embedding matrix to a multiple of 64; the padding must be removed first.
    """
    text_config = getattr(config, "text_config", None)
    vocab = getattr(text_config, "vocab_size", None) or getattr(config, "vocab_size", None)
    if not vocab:
        raise PolicyConfigError(f"{type(config).__name__} has no text_config.vocab_size or vocab_size")
    return int(vocab) - int(getattr(config, "pad_to_multiple_of", None) or 0)


def tokens_to_normalized(token_ids: Sequence[int], vocab_size: int, n_bins: int = N_BINS) -> np.ndarray:
    """Action token ids -> normalised actions in [-1, 1] (bin centres); out-of-range ids clip."""
    centers = bin_centers(n_bins)
    bins = vocab_size - np.asarray(token_ids, dtype=np.int64) - 1
    return centers[np.clip(bins, 0, len(centers) - 1)]


def action_stats(norm_stats: Mapping[str, Any], unnorm_key: str) -> dict[str, np.ndarray]:
    """``q01``, ``q99`` and ``mask`` (all-true when absent) of one dataset's actions."""
    if unnorm_key not in norm_stats:
        raise PolicyConfigError(
            f"unnorm_key {unnorm_key!r} is not in this checkpoint's norm_stats; available: {sorted(norm_stats)}"
        )
    stats = norm_stats[unnorm_key]["action"]
    q01 = np.asarray(stats["q01"], dtype=np.float64)
    q99 = np.asarray(stats["q99"], dtype=np.float64)
    mask = np.asarray(stats.get("mask", np.ones_like(q01, dtype=bool)), dtype=bool)
    return {"q01": q01, "q99": q99, "mask": mask}


def unnormalize(normalized: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """[-1, 1] -> [q01, q99] on masked dimensions; unmasked ones (the gripper) pass through."""
    q01, q99 = stats["q01"], stats["q99"]
    return np.where(stats["mask"], 0.5 * (normalized + 1.0) * (q99 - q01) + q01, normalized)


def to_libero_gripper(action: np.ndarray) -> np.ndarray:
    """OpenVLA's gripper (0 = close, 1 = open) -> LIBERO's (-1 = open, +1 = close), binarised."""
    out = np.array(action, dtype=np.float64)
    out[..., -1] = -np.sign(2.0 * out[..., -1] - 1.0)
    return out
