"""A scripted Inspect model provider for offline tests (``medfuzz-scripted/<anything>``).

Inspect's ``mockllm`` needs tiktoken's download at run time, so it cannot run offline here. Each call pops
the next entry of ``SCRIPT``: a string is the reply (a single capital letter comes with logprobs where
that letter has probability 0.7 and "A" 0.2), an exception is raised, and ``"refuse"`` returns a
content-filter stop.
"""

from __future__ import annotations

import math
from typing import Any

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessageAssistant,
    GenerateConfig,
    Logprob,
    Logprobs,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    TopLogprob,
    modelapi,
)

SCRIPT: list[Any] = []


@modelapi(name="medfuzz-scripted")
class ScriptedAPI(ModelAPI):
    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, **kwargs: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())

    async def generate(self, input, tools, tool_choice, config) -> ModelOutput:
        entry = SCRIPT.pop(0) if SCRIPT else "A"
        if isinstance(entry, Exception):
            raise entry
        usage = ModelUsage(input_tokens=len(input), output_tokens=1, total_tokens=len(input) + 1)
        if entry == "refuse":
            choice = ChatCompletionChoice(message=ChatMessageAssistant(content=""), stop_reason="content_filter")
            return ModelOutput(model=self.model_name, choices=[choice], usage=usage)
        logprobs = None
        if config.logprobs and len(entry) == 1:
            top = [TopLogprob(token=entry, logprob=math.log(0.7)), TopLogprob(token="A", logprob=math.log(0.2))]
            logprobs = Logprobs(content=[Logprob(token=entry, logprob=math.log(0.7), top_logprobs=top)])
        choice = ChatCompletionChoice(message=ChatMessageAssistant(content=entry), stop_reason="stop",
                                      logprobs=logprobs)
        return ModelOutput(model=self.model_name, choices=[choice], usage=usage)
