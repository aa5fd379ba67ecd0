"""medfuzz's lm-eval models in lm-eval's model registry, for every caller that runs or checks an lm-eval model
(``medfuzz-lm-eval``, ``medfuzz run``'s preflight, the tests and benches): one place that knows which modules
register them and in what order."""

from __future__ import annotations


def register_models() -> None:
    """Register medfuzz's lm-eval models; lm_eval.models must be imported first (its registry is rebuilt
    on import, which would wipe ours)."""
    import importlib.util

    import lm_eval.models  # noqa: F401

    import medfuzz.adapters.planted_lm

    # medfuzz-local runs the embedded GGUF through llama.cpp, which needs the 'local' extra
    if importlib.util.find_spec("llama_cpp") is not None:
        import medfuzz.adapters.llama_cpp_lm  # noqa: F401
