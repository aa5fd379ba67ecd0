"""lm-eval models registered by medfuzz (``medfuzz-lm-eval`` imports this after ``lm_eval.models``).

``medfuzz-local``: the embedded SmolLM2-135M-Instruct GGUF, run in-process by transformers (dequantised),
with its tokenizer rebuilt from the GGUF. Needs no server and no hub: ``--model medfuzz-local``.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from medfuzz.local import embedded_gguf, embedded_tokenizer_dir


@register_model("medfuzz-local")
class EmbeddedSmolLM(HFLM):
    def __init__(self, **kwargs: Any) -> None:
        gguf = embedded_gguf()
        kwargs.setdefault("pretrained", str(gguf.parent))
        kwargs.setdefault("gguf_file", gguf.name)
        kwargs.setdefault("tokenizer", str(embedded_tokenizer_dir()))
        kwargs.setdefault("device", "cpu")
        super().__init__(**kwargs)
