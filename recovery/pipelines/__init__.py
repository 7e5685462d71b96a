"""Data and model pipelines behind the CLI: demonstrations, references, critics, policy, rule thresholds."""
