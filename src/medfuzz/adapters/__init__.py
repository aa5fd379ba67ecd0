"""Harness adapters: an Inspect ``Model`` or an lm-eval ``LM`` seen through medfuzz's ``ChatModel``
protocol. These modules import a harness; the core never imports them."""
