"""Token-wise Shapley explanations of clean/attacked multiple-choice prompts (TCES §5.3 / App. E).

Harness-free: an ``ExplainPair`` (clean item, attacked item) and an open-weight model in, Shapley profiles of the
answer-letter log-probability for both prompts, summary numbers, figures and JSON out. Reading pairs from Inspect
logs is ``medfuzz.report.explain_pairs``; the command is ``medfuzz explain``
(``medfuzz.cli.explain``). Needs the ``explain`` extra (shap) and, for models, transformers + torch (``hf`` extra).

Example::

    from medfuzz.solvers.tces.explain import ExplainPair, LetterLogprobModel, explain_pair, write_explanation

    model = LetterLogprobModel.load("embedded")          # or a .gguf file / a transformers model folder
    result = explain_pair(ExplainPair("q1", clean_item, attacked_item), model, max_evals=500)
    write_explanation(result, Path("explanations"))
"""

from medfuzz.solvers.tces.explain.model import EMBEDDED, LetterLogprobModel, load_causal_lm
from medfuzz.solvers.tces.explain.output import write_explanation, write_summary
from medfuzz.solvers.tces.explain.pair import ExplainPair, PairExplanation, explain_pair
from medfuzz.solvers.tces.explain.shapley import DEFAULT_MAX_EVALS, TokenAttribution, shapley_values

__all__ = [
    "DEFAULT_MAX_EVALS",
    "EMBEDDED",
    "ExplainPair",
    "LetterLogprobModel",
    "PairExplanation",
    "TokenAttribution",
    "explain_pair",
    "load_causal_lm",
    "shapley_values",
    "write_explanation",
    "write_summary",
]
