"""``medfuzz-local`` request scheduling without llama.cpp: a fake context whose next-token log-probabilities are
a fixed function of the evaluated tokens, so results can be checked against a from-scratch computation and the
evaluated tokens counted by hand."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

from medfuzz.adapters.llama_cpp_lm import LlamaCppLM, _log_softmax

VOCAB = 256


def next_logprobs(tokens: list[int]) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes()))
    return _log_softmax(rng.normal(size=VOCAB))


class FakeLlama:
    """Character tokens; ``eval`` appends to the cache like llama-cpp-python's ``Llama.eval``."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(512, dtype=np.intc)
        self.n_tokens = 0
        self.evaluated: list[int] = []

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = True) -> list[int]:
        return list(text)

    def n_ctx(self) -> int:
        return 512

    def token_bos(self) -> int:
        return 1

    def eval(self, tokens: list[int]) -> None:
        self.input_ids[self.n_tokens: self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.evaluated.append(len(tokens))

    def create_completion(self, prompt: str, **_: object) -> dict:
        return {"choices": [{"text": prompt[::-1]}]}


class FakeLM(LlamaCppLM):
    def __init__(self) -> None:  # no GGUF: only what the scheduling uses
        LM.__init__(self)
        self.llm = FakeLlama()
        self.max_gen_toks = 8
        self._after = None

    def _last_logprobs(self) -> np.ndarray:
        return next_logprobs(list(self.llm.input_ids[: self.llm.n_tokens]))


def reference(context: str, continuation: str) -> float:
    tokens, cont = list(context.encode()), list(continuation.encode())
    return sum(float(next_logprobs(tokens + cont[:p])[t]) for p, t in enumerate(cont))


def test_prefix_order_reuses_the_cache_and_keeps_results_in_request_order(capsys) -> None:
    clean, attacked, other = "abcdefXYZ", "abcdefQRS", "zzzz"  # attacked: its clean twin with a new ending
    args = [(other, " A"), (clean, " A"), (other, " B"), (attacked, " A"), (clean, " B"), (attacked, " B")]
    lm = FakeLM()
    results = lm.loglikelihood([Instance("loglikelihood", {}, a, i) for i, a in enumerate(args)])
    assert [r[0] for r in results] == pytest.approx([reference(*a) for a in args])
    # sorted: attacked (Q < X), clean, other. attacked " A": 9 + 1 (the space); " B": context kept, 1;
    # clean " A": shares "abcdef" with attacked, 3 + 1; " B": 1; other " A": 4 + 1; " B": 1  -> 22 tokens
    # (in the given order, re-evaluating the last context token each time, it was 38)
    assert sum(lm.llm.evaluated) == 22 and len(lm.llm.evaluated) == 9
    err = capsys.readouterr().err
    assert "Running loglikelihood requests" in err and "6/6" in err


def test_generation_shows_progress(capsys) -> None:
    lm = FakeLM()
    out = lm.generate_until([Instance("generate_until", {}, ("abc", {"until": ["\n"]}), 0),
                             Instance("generate_until", {}, ("xy", {}), 1)])
    assert out == ["cba", "yx"]
    err = capsys.readouterr().err
    assert "Running generate_until requests" in err and "2/2" in err
