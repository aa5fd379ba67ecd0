"""MedFuzz (Ness et al., ``001_*``), harness-free: Algorithm 1 (``engine``), the target dialog (``target``),
Algorithm 2's control fuzzes and p-hats (``controls``), prompts and assumption packs (``prompts``,
``packs/``), parsing and diffs (``parsing``), results and the fuzzed-file format (``results``, ``store``).

Scripting an attack without a harness::

    engine = MedFuzzEngine(target=OpenAIChatModel(...), attacker=OpenAIChatModel(...),
                           config=MedFuzzConfig(turns=5, controls=30))
    result = await engine.run_item(item)
"""

from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import AssumptionPack, builtin_packs, load_pack
from medfuzz.solvers.medfuzz.results import ItemResult, ReplicateResult, TargetReply, Turn
from medfuzz.solvers.medfuzz.store import read_fuzzed, write_fuzzed
from medfuzz.solvers.medfuzz.target import TargetDialog

__all__ = [
    "AssumptionPack",
    "ItemResult",
    "MedFuzzConfig",
    "MedFuzzEngine",
    "ReplicateResult",
    "TargetDialog",
    "TargetReply",
    "Turn",
    "builtin_packs",
    "load_pack",
    "read_fuzzed",
    "write_fuzzed",
]
