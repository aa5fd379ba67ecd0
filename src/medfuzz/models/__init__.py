"""The one small async protocol the engines use to talk to any model, plus harness-free backends."""

from medfuzz.models.logprobs import TokenLogprob, extract_letter_logprobs, letter_of_token
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation, TokenUsage, UsageLedger
from medfuzz.models.scripted import ScriptedChatModel

__all__ = [
    "ChatMessage",
    "ChatModel",
    "Generation",
    "ScriptedChatModel",
    "TokenLogprob",
    "TokenUsage",
    "UsageLedger",
    "extract_letter_logprobs",
    "letter_of_token",
]
