"""TCES (``002_*``), harness-free: Algorithm 1 with RandS, PDWS and DiscreteZOO (``attack``) and its
parameters (``config``); the samplers themselves are in ``medfuzz.samplers``.

Scripting an attack without a harness::

    config = TCESConfig(entity="drugs", sampler="pdws", n=-20, budget=8)
    resources = TCESResources.build(config.entity, config.vocabulary, config.embedding)
    result = await attack_item(item, OpenAIChatModel(...), resources, config)
"""

from medfuzz.solvers.tces.attack import TCESResources, TCESResult, attack_item, first_substitution
from medfuzz.solvers.tces.config import TCESConfig

__all__ = ["TCESConfig", "TCESResources", "TCESResult", "attack_item", "first_substitution"]
