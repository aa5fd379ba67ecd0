"""Token-wise Shapley values of one text with shap's Partition explainer (Owen values over the masker's token
hierarchy, as the TCES paper's App. E), for any game: a function from masked texts to scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medfuzz.errors import MedfuzzError

DEFAULT_MAX_EVALS = 500  # shap's own default for the Partition explainer


@dataclass
class TokenAttribution:
    """Shapley profile of one text: a value per token (row) and output (column).

    ``tokens`` are shap's segments (each token with the text up to the next one, so they read back as the text);
    ``spans`` their character ranges in ``text``. ``base`` is the game with every token masked, ``full`` with none;
    by efficiency ``base + values.sum(0) == full``."""

    text: str
    tokens: list[str]
    spans: list[tuple[int, int]]
    outputs: list[str]
    values: np.ndarray
    base: np.ndarray
    full: np.ndarray
    max_evals: int

    def column(self, output: str) -> np.ndarray:
        return self.values[:, self.outputs.index(output)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "spans": [list(s) for s in self.spans],
            "outputs": self.outputs,
            "values": {name: [float(v) for v in self.values[:, j]] for j, name in enumerate(self.outputs)},
            "base": {name: float(v) for name, v in zip(self.outputs, self.base, strict=True)},
            "full": {name: float(v) for name, v in zip(self.outputs, self.full, strict=True)},
            "max_evals": self.max_evals,
        }


def segment_spans(masker: Any, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """shap's token segments of ``text`` and where each lies in it (special tokens: empty spans)."""
    tokens, _ = masker.token_segments(text)
    offsets = masker.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    spans = []
    for token, offset in zip(tokens, offsets, strict=True):
        start = 0 if offset is None else int(offset[0])
        spans.append((start, start + len(token)))
    return [str(t) for t in tokens], spans


def shapley_values(text: str, game: Callable[[np.ndarray], np.ndarray], masker: Any, outputs: Sequence[str],
                   max_evals: int = DEFAULT_MAX_EVALS, batch_size: int = 16, seed: int = 0) -> TokenAttribution:
    """Owen values of ``game`` over the tokens of ``text`` with ``shap.explainers.Partition`` and ``masker``.

    ``game`` maps a batch of masked inputs (what the masker makes: strings or token-id rows) to an array of shape
    (batch, len(outputs)). ``max_evals`` bounds the game evaluations (shap spreads what it cannot split further
    over the tokens of the unsplit cluster). shap breaks ties in its work queue with numpy's global generator, so
    it is seeded here and restored afterwards."""
    import shap

    if max_evals < 2:
        raise MedfuzzError(f"max_evals must be at least 2, got {max_evals}")
    explainer = shap.explainers.Partition(game, masker, output_names=list(outputs))
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        explanation = explainer([text], max_evals=max_evals, batch_size=batch_size, silent=True)
    finally:
        np.random.set_state(state)
    values = np.asarray(explanation.values[0], dtype=np.float64).reshape(-1, len(outputs))
    base = np.asarray(explanation.base_values[0], dtype=np.float64).reshape(len(outputs))
    tokens, spans = segment_spans(masker, text)
    if len(tokens) != len(values):
        raise MedfuzzError(f"shap returned {len(values)} values for {len(tokens)} tokens")
    full = np.asarray(game(masker(np.ones(len(tokens), dtype=bool), text)[0]), dtype=np.float64).reshape(-1)
    return TokenAttribution(text, tokens, spans, list(outputs), values, base, full, max_evals)
