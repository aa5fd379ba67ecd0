"""Log-probabilities of text under the planted target, one character = one token.

The planted target only has uncertainty at an answer position: the first non-space character after the
last answer cue (``Answer:`` in completion prompts, the start of an assistant turn in the planted chat
rendering). There a letter has the log of its planted probability and any other character ``LOG_FLOOR``;
every other character is certain (log-probability 0). So the log-likelihood of a continuation such as
``" C"`` after ``...Answer:`` is exactly log P(C), which is what lm-eval's loglikelihood tasks compare.
Used by the server's ``/v1/completions`` echo and by the planted lm-eval ``LM``.
"""

from __future__ import annotations

from dataclasses import dataclass

from medfuzz.planted.target import PlantedTarget
from medfuzz.planted.text import ANSWER_CUE, find_question, messages_from_text

LOG_FLOOR = -100.0


@dataclass(frozen=True)
class Position:
    token: str
    logprob: float
    top: dict[str, float]


def answer_distribution(target: PlantedTarget, prefix: str, seed: int | None) -> dict[str, float] | None:
    """The letter distribution right after ``prefix`` (which ends at an answer cue), or None."""
    cues = list(ANSWER_CUE.finditer(prefix))
    if not cues:
        return None
    question = find_question(messages_from_text(prefix[: cues[-1].start()]))
    if question is None:
        return None
    return target.distribution(question, seed, prefix)


def answer_position(text: str) -> int | None:
    """Index of the character where the answer letter stands (after the last cue), if the text has one."""
    cues = list(ANSWER_CUE.finditer(text))
    if not cues:
        return None
    end = cues[-1].end()
    rest = text[end:]
    stripped = rest.lstrip()
    return end + len(rest) - len(stripped) if stripped else None


def positions(target: PlantedTarget, text: str, seed: int | None, top: int = 1) -> list[Position]:
    """Per-character log-probabilities of ``text`` (the first character has nothing before it: 0)."""
    import math

    at = answer_position(text)
    out = [Position(ch, 0.0, {ch: 0.0}) for ch in text]
    if at is not None:
        probs = answer_distribution(target, text[:at], seed)
        if probs is not None:
            logs = {k: math.log(v) if v > 0 else LOG_FLOOR for k, v in probs.items()}
            best = dict(sorted(logs.items(), key=lambda kv: -kv[1])[: max(1, top)])
            out[at] = Position(text[at], logs.get(text[at], LOG_FLOOR), best)
    return out


def continuation_logprob(target: PlantedTarget, context: str, continuation: str,
                         seed: int | None = None) -> tuple[float, bool]:
    """lm-eval's (log-likelihood, is-greedy) of ``continuation`` after ``context``."""
    scored = positions(target, context + continuation, seed)[len(context):]
    total = sum(p.logprob for p in scored)
    greedy = all(p.logprob >= max(p.top.values()) for p in scored)
    return total, greedy
