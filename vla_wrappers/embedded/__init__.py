"""The embedded policy: a small state-based imitation policy that runs on a CPU.

It stands in for a VLA where no GPU is at hand: trained by behaviour cloning on the scripted
expert's demonstrations (``recovery train-policy``), it is good on the layouts it was trained on
and brittle off them, which is what the recovery layer is for. Checkpoints for libero_object and
libero_spatial ship in ``checkpoints/``.
"""
