"""Attack engines (harness-agnostic) and the Inspect @solver shells around them."""
