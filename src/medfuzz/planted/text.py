"""Reading prompts the way the planted models need: where the question is, which options it shows, which
step of a dialog is being asked for. Works on chat messages and on plain completion prompts (lm-eval), and
on the chat rendering the planted lm-eval ``LM`` uses (``render_chat``), so every face sees the same thing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from medfuzz.benchmarks.answers import normalise_text
from medfuzz.models.protocol import ChatMessage

_OPTION = re.compile(r"^\s*\(?([A-J])[\.\):]\s+(.+?)\s*$")
_CHAT_TAG = re.compile(r"<\|(system|user|assistant)\|>\n")
CHAT_END = "<|end|>\n"
# what ends a prompt right before an answer letter: "Answer:" (completion prompts), "ANSWER:" or the start of
# an assistant turn in the planted chat rendering
ANSWER_CUE = re.compile(r"(?:\banswer\s*:|<\|assistant\|>\n)", re.IGNORECASE)


def render_chat(messages: Sequence[dict[str, str]] | Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
    """The planted models' chat template (also exposed to lm-eval): ``<|role|>\\ncontent<|end|>\\n``."""
    parts = []
    for m in messages:
        role, content = (m["role"], m["content"]) if isinstance(m, dict) else (m.role, m.content)
        parts.append(f"<|{role}|>\n{content}{CHAT_END}")
    return "".join(parts) + ("<|assistant|>\n" if add_generation_prompt else "")


def messages_from_text(text: str) -> list[ChatMessage]:
    """Chat messages back from ``render_chat`` output; any other text is one user message."""
    if not _CHAT_TAG.search(text):
        return [ChatMessage("user", text)]
    pieces = _CHAT_TAG.split(text)
    messages = []
    for role, content in zip(pieces[1::2], pieces[2::2], strict=True):
        content = content.removesuffix(CHAT_END)
        if role == "assistant" and not content:
            continue  # the generation prompt
        messages.append(ChatMessage(role, content))  # type: ignore[arg-type]
    return messages


@dataclass(frozen=True)
class ShownQuestion:
    """The multiple-choice question found in a prompt: the whole message, its stem and lettered options."""

    message: str
    stem: str
    options: dict[str, str]

    @property
    def letters(self) -> list[str]:
        return list(self.options)


def option_block(text: str) -> tuple[int, dict[str, str]] | None:
    """The last run of lines ``A. ...``, ``B. ...`` (at least two): (index of its first line, options)."""
    lines = text.splitlines()
    best = None
    i = 0
    while i < len(lines):
        match = _OPTION.match(lines[i])
        if match and match.group(1) == "A":
            options, j = {}, i
            while j < len(lines) and (m := _OPTION.match(lines[j])) and m.group(1) == chr(ord("A") + len(options)):
                options[m.group(1)] = m.group(2)
                j += 1
            if len(options) >= 2:
                best = (i, options)
            i = max(j, i + 1)
        else:
            i += 1
    return best


def find_question(messages: Sequence[ChatMessage]) -> ShownQuestion | None:
    """The question of the last user message that shows lettered options (exemplars in a system message or
    earlier in the same message come before it and are skipped)."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        found = option_block(message.content)
        if found is None:
            continue
        start, options = found
        stem = "\n".join(message.content.splitlines()[:start]).strip()
        return ShownQuestion(message.content, stem, options)
    return None


def classify_target_step(messages: Sequence[ChatMessage]) -> str:
    """``reasoning`` | ``confidences`` | ``answer`` for the last user message of a target dialog."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    low = last.lower()
    if "confiden" in low and "1" in low and "5" in low and option_block(last) is None:
        return "confidences"
    if option_block(last) is not None and ("step by step" in low or "do not state your final" in low):
        return "reasoning"
    return "answer"


def wants_answer_line(messages: Sequence[ChatMessage]) -> bool:
    """Inspect's multiple-choice template asks for a line ``ANSWER: X``."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return "ANSWER: $" in last or "'ANSWER:" in last


@functools.lru_cache(maxsize=8192)
def text_key(text: str) -> str:
    """``normalise_text`` of an option, a stem sentence or a phrase, memoised: the planted rule compares the
    same few thousand texts on every call (about 700,000 normalisations in one ``medfuzz validate --size ci``,
    a fifth of its CPU). Bounded; whole prompts, which rarely repeat, go to ``normalise_text`` directly."""
    return normalise_text(text)


def contains_phrase(text: str, phrases: Sequence[str]) -> bool:
    low = normalise_text(text)
    return any(text_key(p) in low for p in phrases)


def sentences(text: str) -> list[str]:
    """Sentences of a vignette (split after . ! ? followed by a space)."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
