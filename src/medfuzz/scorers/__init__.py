"""Harness-free numbers: ``stats`` (permutation test, Holm/BH, McNemar, bootstrap SE, Gini-Simpson, paired
clean/attacked accuracies — each once), and one module per method (``medfuzz``, ``faithfulness``, ``tces``,
``medguard``) that turns its results into the metrics both harnesses report."""
