"""A tiny, randomly initialised stand-in for an OpenVLA checkpoint: a test double, NOT a policy.

It keeps OpenVLA's contract so that ``OpenVLAPolicy`` loads and runs it exactly like the real
model, offline and in a second on a CPU: a config with ``text_config.vocab_size`` (padded to a
multiple of 64) and ``norm_stats``; a processor that turns ``(prompt, image)`` into ``input_ids``
(Llama-2 ids: BOS = 1, every byte as its byte-fallback token), ``attention_mask`` and
``pixel_values``; and a model whose forward inserts projected image patches after BOS, runs a
(one-layer, 8-wide) Llama, and continues from ``past_key_values`` one token at a time. Its
logits are masked to the 256 action tokens, as a trained OpenVLA effectively emits after "Out:",
so that its outputs exercise the whole de-tokenisation. Weights are stored in bfloat16 like the
real checkpoints (~0.6 MB). Importing this module registers it with the transformers Auto classes.

    python -m vla_wrappers.openvla.tiny /tmp/tiny-openvla   # then --policy-opt model_path=...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForVision2Seq,
    AutoProcessor,
    BatchFeature,
    GenerationMixin,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutputWithPast

from vla_wrappers.openvla.action_tokens import IMAGE_SIZE, N_BINS

MODEL_TYPE = "tiny-openvla"
BOS_ID = 1
BYTE_TOKEN_OFFSET = 3  # Llama-2 maps byte b to token <0xbb> = 3 + b
LLAMA_VOCAB = 32000
PAD_TO_MULTIPLE_OF = 64

# LIBERO-like statistics: translation/rotation deltas normalised, the gripper (mask False) raw
DEFAULT_NORM_STATS: dict[str, Any] = {
    "libero_spatial": {
        "action": {
            "q01": [-0.75, -0.7, -0.9, -0.1, -0.17, -0.2, 0.0],
            "q99": [0.9, 0.85, 0.9, 0.15, 0.2, 0.3, 1.0],
            "mask": [True, True, True, True, True, True, False],
        }
    },
    "libero_object": {
        "action": {
            "q01": [-0.6, -0.8, -0.9, -0.05, -0.1, -0.15, 0.0],
            "q99": [0.8, 0.9, 0.95, 0.1, 0.15, 0.1, 1.0],
            "mask": [True, True, True, True, True, True, False],
        }
    },
}


class TinyOpenVLAConfig(PretrainedConfig):
    model_type = MODEL_TYPE
    sub_configs = {"text_config": LlamaConfig}

    def __init__(
        self,
        text_config: dict | LlamaConfig | None = None,
        pad_to_multiple_of: int = PAD_TO_MULTIPLE_OF,
        n_action_bins: int = N_BINS,
        image_size: int = IMAGE_SIZE,
        patch_size: int = 32,
        norm_stats: dict | None = None,
        **kwargs: Any,
    ):
        if not isinstance(text_config, LlamaConfig):
            defaults = dict(
                vocab_size=LLAMA_VOCAB + PAD_TO_MULTIPLE_OF, hidden_size=8, intermediate_size=16,
                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                max_position_embeddings=512, tie_word_embeddings=True, initializer_range=0.5,
            )
            text_config = LlamaConfig(**{**defaults, **(text_config or {})})
        self.text_config = text_config
        self.pad_to_multiple_of = pad_to_multiple_of
        self.n_action_bins = n_action_bins
        self.image_size = image_size
        self.patch_size = patch_size
        self.norm_stats = norm_stats if norm_stats is not None else DEFAULT_NORM_STATS
        super().__init__(**kwargs)


class TinyOpenVLAForActionPrediction(PreTrainedModel, GenerationMixin):
    config_class = TinyOpenVLAConfig
    base_model_prefix = "tiny_openvla"
    _supports_sdpa = True

    def __init__(self, config: TinyOpenVLAConfig):
        super().__init__(config)
        width = config.text_config.hidden_size
        self.vision_backbone = nn.Conv2d(3, width, kernel_size=config.patch_size, stride=config.patch_size)
        self.projector = nn.Linear(width, width)
        self.language_model = LlamaForCausalLM(config.text_config)
        vocab = config.text_config.vocab_size - config.pad_to_multiple_of
        self.register_buffer("action_token_ids", torch.arange(vocab - config.n_action_bins, vocab), persistent=False)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.text_config.initializer_range
        if isinstance(module, (nn.Linear, nn.Conv2d, nn.Embedding)):
            module.weight.data.normal_(0.0, std)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.get_input_embeddings()

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.FloatTensor | None = None,
        past_key_values: Any = None,
        use_cache: bool | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        """The prompt with its image (empty cache), or one more token continuing the cache."""
        if past_key_values is not None and past_key_values.get_seq_length() > 0:
            out = self.language_model(input_ids=input_ids, past_key_values=past_key_values, use_cache=use_cache)
        else:
            patches = self.vision_backbone(pixel_values).flatten(2).transpose(1, 2)  # (B, P, width)
            patches = self.projector(patches)
            text = self.get_input_embeddings()(input_ids)
            embeds = torch.cat([text[:, :1], patches, text[:, 1:]], dim=1)  # image after BOS
            if attention_mask is not None:
                ones = attention_mask.new_ones(patches.shape[:2])
                attention_mask = torch.cat([attention_mask[:, :1], ones, attention_mask[:, 1:]], dim=1)
            out = self.language_model(inputs_embeds=embeds, attention_mask=attention_mask,
                                      past_key_values=past_key_values, use_cache=use_cache)
        logits = torch.full_like(out.logits, torch.finfo(out.logits.dtype).min)
        logits[..., self.action_token_ids] = out.logits[..., self.action_token_ids]
        return CausalLMOutputWithPast(logits=logits, past_key_values=out.past_key_values)


class TinyOpenVLAProcessor:
    """``processor(prompt, image)`` like OpenVLA's PrismaticProcessor, with no tokenizer files."""

    config_name = "processor_config.json"

    def __init__(self, image_size: int = IMAGE_SIZE):
        self.image_size = image_size

    def __call__(self, text: str, images: Image.Image, return_tensors: str = "pt") -> BatchFeature:
        ids = [BOS_ID] + [BYTE_TOKEN_OFFSET + b for b in text.encode("utf-8")]
        pixels = np.asarray(images.convert("RGB").resize((self.image_size,) * 2), dtype=np.float32) / 127.5 - 1.0
        return BatchFeature(
            {
                "input_ids": torch.tensor([ids]),
                "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                "pixel_values": torch.from_numpy(pixels).permute(2, 0, 1)[None],
            },
            tensor_type=return_tensors,
        )

    def save_pretrained(self, path: str | Path) -> None:
        config = {"processor_class": type(self).__name__, "image_size": self.image_size}
        (Path(path) / self.config_name).write_text(json.dumps(config, indent=2))

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> TinyOpenVLAProcessor:
        config = json.loads((Path(path) / cls.config_name).read_text())
        return cls(image_size=config["image_size"])


def save_tiny_openvla(path: str | Path, seed: int = 0, norm_stats: dict | None = None) -> Path:
    """Write a tiny checkpoint (config, bfloat16 weights, processor) that loads offline."""
    torch.manual_seed(seed)
    model = TinyOpenVLAForActionPrediction(TinyOpenVLAConfig(norm_stats=norm_stats))
    path = Path(path)
    model.to(torch.bfloat16).save_pretrained(path)
    TinyOpenVLAProcessor(model.config.image_size).save_pretrained(path)
    return path


AutoConfig.register(MODEL_TYPE, TinyOpenVLAConfig, exist_ok=True)
AutoModelForVision2Seq.register(TinyOpenVLAConfig, TinyOpenVLAForActionPrediction, exist_ok=True)
AutoProcessor.register(TinyOpenVLAConfig, TinyOpenVLAProcessor, exist_ok=True)

if __name__ == "__main__":
    print(save_tiny_openvla(sys.argv[1]))
