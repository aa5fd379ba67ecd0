"""Harness-free numbers: one module per method (``medfuzz``, ``faithfulness``, ``tces``, ``medguard``) that turns
its results into the metrics both harnesses report, over the statistics of ``medfuzz.stats`` (permutation test,
Holm/BH, McNemar, bootstrap SE, Gini-Simpson, paired clean/attacked accuracies — each once; a base layer, so the
solvers use them without importing the scorers)."""
