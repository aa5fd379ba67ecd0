"""What a run records in its task metadata when it starts, as a function of its sample count, so the report can
recompute it for shards merged into one run (``medfuzz.report.shards``)."""

from __future__ import annotations

from typing import Any

from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.stats import attainability


def attainability_record(config: MedFuzzConfig, items: int) -> dict[str, Any] | None:
    """What the MedFuzz task's ``warn_attainability`` records for a run of ``items`` samples, without the warning
    (None without a significance test)."""
    if not config.controls:
        return None
    reach = attainability(config.max_controls, items * config.replicates, config.alpha)
    return {**reach.to_dict(), "holm_family_max": int(config.alpha * (config.max_controls + 1) + 1e-9)}
