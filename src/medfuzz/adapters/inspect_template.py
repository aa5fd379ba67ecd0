"""Inspect model provider ``medfuzz-template``: the deterministic template attacker (no LLM), so that

    inspect eval medfuzz/medfuzz_medqa --model <real target> --model-role attacker=medfuzz-template/attacker

runs MedFuzz with valid attacks against a small local target. Registered through medfuzz's Inspect entry
point (``medfuzz._registry``). ``-M seed=<n>`` / ``-M sentences=<n>`` / ``-M red_herring=false`` (model args)
tune it.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage as InspectMessage
from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, modelapi
from inspect_ai.tool import ToolChoice, ToolInfo

from medfuzz.models.protocol import ChatMessage
from medfuzz.options import as_bool
from medfuzz.planted.template import template_attacker


@modelapi(name="medfuzz-template")
class TemplateAttackerAPI(ModelAPI):
    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, seed: int = 0, sentences: int = 2,
                 red_herring: bool | str = True, **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        self._attacker = template_attacker(seed=int(seed), sentences=int(sentences),
                                           red_herring=as_bool(red_herring, "red_herring"))

    async def generate(self, input: list[InspectMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        messages = [ChatMessage(m.role if m.role in ("system", "user", "assistant") else "user", m.text)  # type: ignore[arg-type]
                    for m in input]
        reply = await self._attacker.generate(messages, seed=config.seed, temperature=config.temperature)
        return ModelOutput.from_content(model=self.model_name, content=reply.text)
