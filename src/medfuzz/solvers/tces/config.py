"""Every parameter of a TCES run in one place (the Inspect task, the lm-eval hook and Python callers all build
a ``TCESConfig``; ``TCESConfig.from_options(**raw)`` converts and checks raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from medfuzz.options import MethodConfig, check
from medfuzz.samplers.sampling import SAMPLERS
from medfuzz.samplers.vocab import ENTITY_TYPES


@dataclass(frozen=True)
class TCESConfig(MethodConfig):
    LABEL: ClassVar[str] = "TCES"
    DOCS: ClassVar[dict[str, str]] = {
        "entity": "drugs or diseases: the entity type substituted in distractors",
        "sampler": "rands, pdws or zoo (random, powerscaled distance-weighted, DiscreteZOO)",
        "n": "PDWS exponent: < 0 near the key, > 0 far from it, 0 uniform (paper Eq. 3)",
        "budget": "B: attack queries per item, the clean question not counted (paper: 1 and 8)",
        "zoo_m": "DiscreteZOO: M gradient points per step (each is a query)",
        "zoo_step": "DiscreteZOO: step size λ",
        "zoo_neighbours": "DiscreteZOO: gradient points are drawn among this many entries nearest the current "
                          "entity (paper App. E); none = 5·zoo_m, as the authors' code",
        "embedding": "default (offline all-MiniLM-L6-v2), coder, gte-base, or any sentence-transformers / HF "
                     "model name or path",
        "vocabulary": "none = builtin; or a file: DrugCentral id,name (no header), CTD with a name header, or "
                      "one name per line",
        "seed": "seed of every random draw and of every model call",
        "max_tokens": "target answer budget",
        "temperature": "target sampling temperature",
        "max_retries": "extra tries (new seed) of a query whose reply failed, was empty, refused or unparseable",
    }

    entity: str = "drugs"
    sampler: str = "pdws"
    n: float = -20.0
    budget: int = 8
    zoo_m: int = 5
    zoo_step: float = 1.0
    zoo_neighbours: int | None = None
    embedding: str = "default"
    vocabulary: str | None = None
    seed: int = 0
    max_tokens: int = 16
    temperature: float | None = 0.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        check(self.entity in ENTITY_TYPES, f"entity must be one of {list(ENTITY_TYPES)}, got {self.entity!r}")
        check(self.sampler in SAMPLERS, f"sampler must be one of {list(SAMPLERS)}, got {self.sampler!r}")
        check(self.budget >= 1, f"budget must be at least 1, got {self.budget}")
        check(self.zoo_m >= 1, f"zoo_m (gradient points per step) must be at least 1, got {self.zoo_m}")
        check(self.zoo_neighbours is None or self.zoo_neighbours >= self.zoo_m,
              f"zoo_neighbours must be at least zoo_m ({self.zoo_m}) so that M distinct gradient points exist, "
              f"got {self.zoo_neighbours}")
        check(self.zoo_step > 0, f"zoo_step must be positive, got {self.zoo_step}")
        check(self.max_tokens >= 1, f"max_tokens must be at least 1, got {self.max_tokens}")
        check(self.max_retries >= 0, f"max_retries must be 0 or more, got {self.max_retries}")
        check(self.temperature is None or self.temperature >= 0,
              f"temperature must be 0 or more, got {self.temperature}")

    @property
    def zoo_neighbourhood(self) -> int:
        """How many nearest entries DiscreteZOO draws its gradient points from."""
        return 5 * self.zoo_m if self.zoo_neighbours is None else self.zoo_neighbours

    def max_calls(self, items: int) -> dict[str, int]:
        """Upper bound on target calls for ``items`` items (the ``UsageLedger`` role name): the clean question
        plus the whole budget B per item (DiscreteZOO's gradient points count against B too), each query tried
        up to ``1 + max_retries`` times when the reply is unusable. Items without an entity of the type cost
        nothing, so the real count is usually lower."""
        return {"target": items * (1 + self.budget) * (1 + self.max_retries)}
