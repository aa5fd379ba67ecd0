"""Reports over finished runs (Inspect logs, lm-eval output folders)."""
