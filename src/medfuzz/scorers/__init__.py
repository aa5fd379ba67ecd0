"""Statistics (harness-agnostic) and the Inspect @scorer/@metric shells."""
