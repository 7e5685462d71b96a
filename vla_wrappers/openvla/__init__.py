"""OpenVLA (7B, Llama-2 + DINOv2/SigLIP) as a base policy, loaded in-process through transformers 4.x.

``action_tokens`` holds the model-free action contract (prompt, image, de-tokenisation, gripper);
``policy`` loads a checkpoint and runs greedy decoding; ``tiny`` is an offline test double.
"""
