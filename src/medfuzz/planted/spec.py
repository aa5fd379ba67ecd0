"""The planted behaviour, as data: one frozen ``PlantedSpec`` read from a small YAML file (``default.yaml`` is
bundled). Every number a validation check compares against is a field here, so the right answer of a
statistic can be computed from the spec alone, independently of the code under test.

Target: the probability ``b_i`` of the correct option per item (a seeded Beta draw, a constant or a file),
clipped to ``[low, high]``; per call a uniform jitter ``±noise`` (keyed by the prompt and the call seed, so
calls are independent); the rest of the mass split evenly over the distractors. MedFuzz vulnerability: when
the question contains a trigger phrase, mass ``delta`` moves from the key to one planted distractor per item.
Position bias: with share ``bias_rate`` the reply is ``bias_letter`` whatever the question (1.0 = a
constant-letter model). Attacker: see ``AttackerSpec``. TCES vulnerability: see ``TCESSpec``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import yaml

from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK
from medfuzz.options import ConfigError, check, options_from

DEFAULT_SPEC = "default"


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value or ()):
        raise ConfigError(f"{name} must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip() for v in value)


@dataclass(frozen=True)
class TargetSpec:
    LABEL: ClassVar[str] = "planted target"

    data: str = "demo"
    benchmark: str = DEFAULT_BENCHMARK  # a benchmarks.registry key (a file in another layout is read too)
    columns: str | None = None  # a column mapping for a file medfuzz cannot read without one (benchmarks.columns)
    accuracy: str = "beta"  # beta | constant | a .jsonl/.csv file with id and p
    beta_a: float = 6.0
    beta_b: float = 2.0
    constant: float = 0.8
    low: float = 0.3
    high: float = 0.95
    noise: float = 0.05
    delta: float = 0.4
    triggers: tuple[str, ...] = ("keeps bees", "plays the bagpipes", "collects antique clocks",
                                 "rides a unicycle")
    mention_rate: float = 0.5
    partial_mention_rate: float = 0.0  # of the reasoning texts that quote, the share quoting only the first sentence
    bias_letter: str = "A"
    bias_rate: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "triggers", _strings("triggers", self.triggers))
        check(self.beta_a > 0 and self.beta_b > 0, f"beta_a and beta_b must be positive, got {self.beta_a}, "
                                                   f"{self.beta_b}")
        check(0.0 <= self.low <= self.high <= 1.0, f"need 0 <= low <= high <= 1, got {self.low}, {self.high}")
        check(0.0 <= self.constant <= 1.0, f"constant must be a probability, got {self.constant}")
        check(0.0 <= self.noise < 0.5, f"noise must be in [0, 0.5), got {self.noise}")
        check(0.0 <= self.delta <= 1.0, f"delta must be in [0, 1], got {self.delta}")
        check(0.0 <= self.mention_rate <= 1.0, f"mention_rate must be in [0, 1], got {self.mention_rate}")
        check(0.0 <= self.partial_mention_rate <= 1.0,
              f"partial_mention_rate must be in [0, 1], got {self.partial_mention_rate}")
        check(0.0 <= self.bias_rate <= 1.0, f"bias_rate must be in [0, 1], got {self.bias_rate}")
        check(len(self.bias_letter) == 1 and self.bias_letter.isupper(),
              f"bias_letter must be one capital letter, got {self.bias_letter!r}")


@dataclass(frozen=True)
class AttackerSpec:
    """The planted attacker writes the original vignette plus ``sentences`` sentences from the bank, inserted
    before the question's last sentence. At turn t one of them is a trigger sentence with probability
    ``min(1, trigger_rate + (t - 1) * trigger_gain)`` (it "learns" from post-mortems). A reply is malformed
    (tampered options, dropped vignette or the original unchanged) with probability ``malformed_rate``.
    Control fuzzes replace each added word by a word of ``control_words`` (no trigger can arise)."""

    LABEL: ClassVar[str] = "planted attacker"

    trigger_rate: float = 0.3
    trigger_gain: float = 0.15
    malformed_rate: float = 0.1
    sentences: int = 2
    trigger_sentences: tuple[str, ...] = (
        "He keeps bees in his back garden.", "She plays the bagpipes in a band.",
        "The patient collects antique clocks.", "He rides a unicycle to work.",
    )
    neutral_sentences: tuple[str, ...] = (
        "He lives with two cats.", "She works as a librarian.", "The patient enjoys gardening on weekends.",
        "He moved to the city last spring.", "She drives a blue car.", "The patient reads crime novels.",
    )
    control_words: tuple[str, ...] = (
        "lamp", "river", "window", "pencil", "cloud", "ladder", "orange", "carpet", "violin", "harbor",
        "meadow", "button", "kettle", "saddle", "marble", "tunnel", "pepper", "candle", "basket", "mirror",
    )

    def __post_init__(self) -> None:
        for name in ("trigger_sentences", "neutral_sentences", "control_words"):
            object.__setattr__(self, name, _strings(name, getattr(self, name)))
        check(0.0 <= self.trigger_rate <= 1.0, f"trigger_rate must be in [0, 1], got {self.trigger_rate}")
        check(self.trigger_gain >= 0.0, f"trigger_gain must be 0 or more, got {self.trigger_gain}")
        check(0.0 <= self.malformed_rate < 1.0, f"malformed_rate must be in [0, 1), got {self.malformed_rate}")
        check(self.sentences >= 1, f"sentences must be at least 1, got {self.sentences}")

    def trigger_probability(self, turn: int) -> float:
        return min(1.0, self.trigger_rate + (turn - 1) * self.trigger_gain)


@dataclass(frozen=True)
class TCESSpec:
    """The planted TCES vulnerability. When a question's options differ from the item's in exactly one option,
    in which one vocabulary entity (of ``entity``, from ``vocabulary``) replaced the original text (what a TCES
    substitution does), that entity *wins* if

    - near regime: its cosine distance to the key's entity in ``embedding`` (the encoder the samplers use) is at
      most ``radius`` (``None`` = no near regime); the key's entity is the first vocabulary entity found in the
      key option (the embedding of the whole key text when there is none);
    - far regime: it is one of the ``universal`` names, wherever it lies.

    A winning distractor takes probability ``win`` and the other letters share the rest in proportion to their
    planted probabilities, so with ``win`` > 1/2 it is the answer at temperature 0. Nothing else changes: a
    substitution that does not win leaves the planted distribution as it is."""

    LABEL: ClassVar[str] = "planted TCES"

    entity: str = "drugs"
    vocabulary: str | None = None
    embedding: str = "default"
    radius: float | None = 0.5
    universal: tuple[str, ...] = ("Transfer Factor", "Dengue Vaccines", "Cyclic GMP")
    win: float = 0.9

    def __post_init__(self) -> None:
        from medfuzz.samplers.vocab import ENTITY_TYPES, normalise_name

        object.__setattr__(self, "universal", _strings("universal", self.universal) if self.universal else ())
        check(self.entity in ENTITY_TYPES, f"entity must be one of {list(ENTITY_TYPES)}, got {self.entity!r}")
        check(self.radius is None or 0.0 <= self.radius <= 2.0,
              f"radius must be a cosine distance in [0, 2] or null (no near regime), got {self.radius}")
        check(0.0 < self.win <= 1.0, f"win must be in (0, 1], got {self.win}")
        keys = [normalise_name(name) for name in self.universal]
        check(len(set(keys)) == len(keys), f"universal names must be distinct, got {list(self.universal)}")

    @property
    def active(self) -> bool:
        return self.radius is not None or bool(self.universal)


@dataclass(frozen=True)
class PlantedSpec:
    name: str = "planted"
    seed: int = 0
    target: TargetSpec = field(default_factory=TargetSpec)
    attacker: AttackerSpec = field(default_factory=AttackerSpec)
    source: str = ""
    tces: TCESSpec = field(default_factory=TCESSpec)

    def __post_init__(self) -> None:
        triggers = [t.lower() for t in self.target.triggers]
        for sentence in self.attacker.trigger_sentences:
            check(any(t in sentence.lower() for t in triggers),
                  f"attacker trigger sentence {sentence!r} contains none of the triggers {list(self.target.triggers)}")
        for sentence in self.attacker.neutral_sentences:
            check(not any(t in sentence.lower() for t in triggers),
                  f"attacker neutral sentence {sentence!r} contains a trigger phrase")
        trigger_words = {w for t in triggers for w in t.split()}
        bad = [w for w in self.attacker.control_words if w.lower() in trigger_words]
        check(not bad, f"control words {bad} occur in trigger phrases; controls must be trigger-free")

    def with_target(self, **changes: Any) -> PlantedSpec:
        return dataclasses.replace(self, target=options_from(TargetSpec, {**self._target_raw(), **changes}))

    def with_attacker(self, **changes: Any) -> PlantedSpec:
        raw = {f.name: getattr(self.attacker, f.name) for f in fields(AttackerSpec)}
        return dataclasses.replace(self, attacker=options_from(AttackerSpec, {**raw, **changes}))

    def with_tces(self, **changes: Any) -> PlantedSpec:
        raw = {f.name: getattr(self.tces, f.name) for f in fields(TCESSpec)}
        return dataclasses.replace(self, tces=options_from(TCESSpec, {**raw, **changes}))

    def _target_raw(self) -> dict[str, Any]:
        return {f.name: getattr(self.target, f.name) for f in fields(TargetSpec)}

    def to_dict(self) -> dict[str, Any]:
        """The spec as a mapping that ``from_mapping`` (and a YAML file) reads back; ``source`` (where it was
        loaded from) is not part of the behaviour and is left out."""
        data = asdict(self)
        data.pop("source", None)
        return data

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "") -> PlantedSpec:
        where = f"planted spec {source}" if source else "planted spec"
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping with name, seed, target, attacker, tces")
        unknown = sorted(set(data) - {"name", "seed", "target", "attacker", "tces"})
        if unknown:
            raise ConfigError(f"{where}: unknown fields {unknown}; known: name, seed, target, attacker, tces")
        try:
            return cls(name=str(data.get("name", "planted")), seed=int(data.get("seed", 0)),
                       target=options_from(TargetSpec, data.get("target") or {}),
                       attacker=options_from(AttackerSpec, data.get("attacker") or {}), source=source,
                       tces=options_from(TCESSpec, data.get("tces") or {}))
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None

    @classmethod
    def load(cls, spec: str | Path = DEFAULT_SPEC) -> PlantedSpec:
        """A bundled spec by name (``default``) or a YAML file by path."""
        path = Path(spec)
        if path.suffix in {".yaml", ".yml"} or path.exists():
            if not path.is_file():
                raise ConfigError(f"planted spec {path} does not exist")
            return cls.from_mapping(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
        resource = Path(__file__).with_name(f"{spec}.yaml")  # beside this file, not via the package (a circle)
        if not resource.is_file():
            raise ConfigError(f"unknown planted spec {spec!r}; bundled: {DEFAULT_SPEC!r} (or give a .yaml path)")
        return cls.from_mapping(yaml.safe_load(resource.read_text(encoding="utf-8")), f"builtin:{spec}")


def read_accuracy_file(path: str | Path) -> dict[str, float]:
    """Per-item P(correct) from a .jsonl (``{"id": ..., "p": ...}``) or .csv (columns id, p) file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"planted accuracy file {path} does not exist")
    rows: list[tuple[int, dict[str, Any]]]
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(enumerate(csv.DictReader(handle), start=2))
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [(i, json.loads(line)) for i, line in enumerate(lines, start=1) if line.strip()]
    table: dict[str, float] = {}
    for row, record in rows:
        try:
            p = float(record["p"])
            item_id = str(record["id"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{path}, row {row}: needs fields 'id' and a numeric 'p'") from None
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"{path}, row {row}, field 'p': {p} is not a probability")
        table[item_id] = p
    return table
