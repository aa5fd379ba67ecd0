"""Statistics (harness-agnostic) and their harness shells."""
