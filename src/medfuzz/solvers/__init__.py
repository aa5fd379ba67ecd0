"""Harness-free attack engines and item builders, one sub-package per method (``medfuzz``, ``tces``,
``medguard``), sharing the outcome vocabulary of ``solvers.outcomes``."""

from medfuzz.solvers.outcomes import ATTACKED, Outcome

__all__ = ["ATTACKED", "Outcome"]
