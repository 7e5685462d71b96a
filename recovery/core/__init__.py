"""The core every other package builds on: robot contract, actions, modes, decisions, the episode loop."""
