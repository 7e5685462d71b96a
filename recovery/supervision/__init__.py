"""Supervision: watch execution, decide every k steps, roll back to a remembered nominal state."""
