"""Attack engines (harness-agnostic) and their harness shells."""
