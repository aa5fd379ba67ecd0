"""``medfuzz-planted``: the planted (known-truth) target as an lm-eval ``LM``, in-process.

``loglikelihood`` is exact under the planted rule (``medfuzz.planted.scoring``: only the answer letter
after the last ``Answer:`` cue or assistant turn is uncertain), ``generate_until`` replies as the planted
target, and the chat template is the planted one, so ``LMEvalChatModel`` round-trips dialogs through it.

    medfuzz-lm-eval --model medfuzz-planted --model_args spec=default,data=demo --tasks medqa_clean \\
        --metadata '{"data": "demo"}'
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from medfuzz.planted.scoring import continuation_logprob
from medfuzz.planted.spec import PlantedSpec
from medfuzz.planted.target import PlantedTarget
from medfuzz.planted.text import messages_from_text, render_chat


class _Tokenizer:
    """What ``LMEvalChatModel`` looks for to decide that the model has a chat template."""

    chat_template = "planted"


@register_model("medfuzz-planted")
class PlantedLM(LM):
    def __init__(self, spec: str = "default", data: str | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__()
        loaded = PlantedSpec.load(spec)
        if data:
            loaded = loaded.with_target(data=data)
        self.spec = loaded
        self.target = PlantedTarget(loaded)
        self.seed = seed  # None: each prompt's jitter is keyed by the prompt alone (lm-eval passes no call seed)
        self.tokenizer = _Tokenizer()

    def tok_encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]  # one character per token, as the planted server

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        results = []
        for request in requests:
            context, continuation = request.args
            results.append(continuation_logprob(self.target, context, continuation, self.seed))
            self.cache_hook.add_partial("loglikelihood", (context, continuation), results[-1])
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        # every character outside an answer position is certain under the planted rule
        return [continuation_logprob(self.target, "", request.args[0], self.seed)[0] for request in requests]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        results = []
        for request in requests:
            context, kwargs = request.args
            kwargs = dict(kwargs or {})
            temperature = float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample", False) else 0.0
            text = self.target.respond(messages_from_text(context), seed=kwargs.get("seed", self.seed),
                                       temperature=temperature).text
            until = kwargs.get("until") or []
            for stop in [until] if isinstance(until, str) else until:
                if stop and stop in text:
                    text = text[: text.index(stop)]
            results.append(text)
            self.cache_hook.add_partial("generate_until", (context, kwargs), text)
        return results

    @property
    def tokenizer_name(self) -> str:
        return "medfuzz-planted"

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return "planted"

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return render_chat(chat_history, add_generation_prompt)
