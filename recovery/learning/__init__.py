"""The learned mode selector: its observation, its Gymnasium environment, PPO training, loading."""
