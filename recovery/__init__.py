"""The recovery core: robot-backend interface, evaluation, and (later) modes, memory and selectors."""
