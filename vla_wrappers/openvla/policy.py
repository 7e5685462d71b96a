"""OpenVLA in-process: load a checkpoint with transformers 4.x, decode 7 action tokens greedily.

Decoding is our own loop over the model's forward (prompt + image once, then one token at a time
from ``past_key_values``) rather than the checkpoint's ``predict_action``: under transformers
>= 4.50 its ``generate`` path slices the prompt to one token on the first step (an empty
``DynamicCache`` is not ``None``) and silently never looks at the image (openvla/openvla#346).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from recovery.core.actions import ACTION_DIM
from recovery.core.robot import Observation, RobotBackend
from vla_wrappers.base import Policy, PolicyConfigError, PolicyError, PolicyOutput, config_from_options, resolve_device
from vla_wrappers.openvla import action_tokens as at

TRANSFORMERS_HINT = "pip install 'agentic-recovery[openvla]' (transformers==4.57.6)"


@dataclass(frozen=True)
class OpenVLAPolicyConfig:
    model_path: str = "openvla/openvla-7b-finetuned-libero-spatial"  # local dir or hub id
    unnorm_key: str = "libero_spatial"  # the dataset whose action statistics de-normalise
    device: str = "auto"  # auto | cpu | cuda; auto = cuda when available
    dtype: str = "auto"  # auto (bfloat16 on cuda, float32 on cpu) | bfloat16 | float16 | float32
    center_crop: bool = True  # the LIBERO fine-tunes were trained with random-crop augmentation
    # The checkpoint's remote code cannot answer transformers' default sdpa probe (openvla#346).
    attn_implementation: str = "eager"


class OpenVLAPolicy(Policy):
    """One action per inference (OpenVLA predicts no chunk), from the agent-view camera."""

    needs_images = True

    def __init__(self, backend: RobotBackend | None = None, config: OpenVLAPolicyConfig = OpenVLAPolicyConfig()):
        torch, auto_model, auto_processor = _import_transformers()
        self.config = config
        self._torch = torch
        self.device = resolve_device(config.device)
        self.dtype = _resolve_dtype(torch, config.dtype, self.device)
        self.processor = auto_processor.from_pretrained(config.model_path, trust_remote_code=True)
        with warnings.catch_warnings():  # 4.x names it deprecated; the checkpoints' auto_map still uses it
            warnings.filterwarnings("ignore", message=".*AutoModelForVision2Seq.*", category=FutureWarning)
            self.model = auto_model.from_pretrained(
                config.model_path, dtype=self.dtype, trust_remote_code=True,
                attn_implementation=config.attn_implementation,
            )
        self.model.to(self.device).eval()
        norm_stats = getattr(self.model.config, "norm_stats", None) or getattr(self.model, "norm_stats", None)
        if not norm_stats:
            raise PolicyConfigError(f"{config.model_path} has no norm_stats: not an OpenVLA checkpoint")
        self.stats = at.action_stats(norm_stats, config.unnorm_key)
        if self.stats["q01"].shape != (ACTION_DIM,):
            raise PolicyConfigError(f"{config.unnorm_key!r} actions are {self.stats['q01'].shape}-D; need {ACTION_DIM}")
        self.vocab_size = at.unpadded_vocab_size(self.model.config)
        self.n_bins = int(getattr(self.model.config, "n_action_bins", at.N_BINS))
        self._prompt: str | None = None

    @classmethod
    def from_options(cls, backend: RobotBackend | None, options: dict[str, str]) -> OpenVLAPolicy:
        return cls(backend, config_from_options(OpenVLAPolicyConfig, options))

    def reset(self, instruction: str) -> None:
        self._prompt = at.prompt_for(instruction)

    def infer(self, obs: Observation) -> PolicyOutput:
        if self._prompt is None:
            raise PolicyError("OpenVLAPolicy.infer before reset(instruction): no task to prompt with")
        if "agentview_image" not in obs:
            raise PolicyError("OpenVLA needs the agent-view camera: observation has no 'agentview_image'")
        image = at.preprocess_image(obs["agentview_image"], self.config.center_crop)
        token_ids = self._action_tokens(self.processor(self._prompt, image))
        normalized = at.tokens_to_normalized(token_ids, self.vocab_size, self.n_bins)
        action = at.to_libero_gripper(at.unnormalize(normalized, self.stats))
        return PolicyOutput(action[None], {"action_token_ids": token_ids})

    def _action_tokens(self, inputs: Any) -> list[int]:
        """Greedy decoding of one token per action dimension, reusing the key/value cache."""
        torch = self._torch
        input_ids = torch.tensor([at.with_empty_token(inputs["input_ids"][0].tolist())], device=self.device)
        pixel_values = inputs["pixel_values"].to(self.device, dtype=self.dtype)
        tokens: list[int] = []
        with torch.inference_mode():  # one unpadded prompt: every token is attended
            out = self.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             pixel_values=pixel_values, use_cache=True)
            for _ in range(ACTION_DIM):
                tokens.append(int(out.logits[0, -1].argmax()))
                if len(tokens) < ACTION_DIM:
                    step = torch.tensor([[tokens[-1]]], device=self.device)
                    out = self.model(input_ids=step, past_key_values=out.past_key_values, use_cache=True)
        return tokens


def _import_transformers() -> tuple[Any, Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise PolicyConfigError(f"the OpenVLA policy needs torch and transformers: {TRANSFORMERS_HINT}") from exc
    auto_model = getattr(transformers, "AutoModelForVision2Seq", None)
    if auto_model is None:
        raise PolicyConfigError(
            f"OpenVLA checkpoints load through AutoModelForVision2Seq, which transformers "
            f"{transformers.__version__} no longer has (removed in 5.x); {TRANSFORMERS_HINT}"
        )
    import vla_wrappers.openvla.tiny  # noqa: F401  registers the test double, so a saved one loads by path

    return torch, auto_model, transformers.AutoProcessor


def _resolve_dtype(torch: Any, dtype: str, device: str) -> Any:
    if dtype == "auto":
        return torch.bfloat16 if device == "cuda" else torch.float32
    if dtype not in ("bfloat16", "float16", "float32"):
        raise PolicyConfigError(f"dtype={dtype!r}; expected auto, bfloat16, float16 or float32")
    return getattr(torch, dtype)
