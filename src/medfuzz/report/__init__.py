"""Reports built from Inspect logs and lm-eval results."""
