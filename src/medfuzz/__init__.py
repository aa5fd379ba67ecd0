"""medfuzz: MedFuzz, TCES and MedGuard as native tasks, solvers and scorers for Inspect and lm-eval.

The harness-agnostic core (``benchmarks``, ``models``, ``samplers``, ``solvers`` engines, ``scorers``
statistics) imports no evaluation harness; ``adapters`` and ``tasks`` hold the thin harness shells.
"""

__version__ = "0.1.0"
