"""Every parameter of a TCES run in one place (the Inspect task, the lm-eval hook and Python callers all build
a ``TCESConfig``; ``TCESConfig.from_options(**raw)`` converts and checks raw values)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from medfuzz.options import check, options_from
from medfuzz.samplers.sampling import SAMPLERS
from medfuzz.samplers.vocab import ENTITY_TYPES


@dataclass(frozen=True)
class TCESConfig:
    LABEL: ClassVar[str] = "TCES"
    DOCS: ClassVar[dict[str, str]] = {
        "entity": "drugs | diseases: the entity type substituted in distractors",
        "sampler": "rands | pdws | zoo (random, powerscaled distance-weighted, DiscreteZOO)",
        "n": "PDWS exponent: < 0 near the key, > 0 far from it, 0 uniform (paper Eq. 3)",
        "budget": "B: target queries per item (paper: 1 and 8)",
        "zoo_m": "DiscreteZOO: M gradient points per step (each is a query)",
        "zoo_step": "DiscreteZOO: step size λ",
        "embedding": "default (offline MiniLM) | coder | gte-base | a model name or path",
        "vocabulary": "builtin, or a file (DrugCentral id,name; CTD name header; one name per line)",
        "seed": "seed of the sampler and of every model call",
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
        check(self.zoo_step > 0, f"zoo_step must be positive, got {self.zoo_step}")
        check(self.max_tokens >= 1, f"max_tokens must be at least 1, got {self.max_tokens}")
        check(self.max_retries >= 0, f"max_retries must be 0 or more, got {self.max_retries}")
        check(self.temperature is None or self.temperature >= 0,
              f"temperature must be 0 or more, got {self.temperature}")

    @classmethod
    def from_options(cls, ignore_unknown: bool = False, **raw: Any) -> TCESConfig:
        return options_from(cls, raw, ignore_unknown=ignore_unknown)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
