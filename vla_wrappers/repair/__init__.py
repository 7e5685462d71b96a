"""The learned repair policy: a goal-conditioned network that puts the world back as a remembered state had it."""
