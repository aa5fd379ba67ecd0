"""Files of ``medfuzz explain``: one JSON and one figure per explained letter for each pair, and a summary table
over all pairs (Markdown and JSON)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from medfuzz.solvers.tces.explain.pair import PairExplanation
from medfuzz.solvers.tces.explain.plot import plot_pair


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "item"


def _json_safe(value: Any) -> Any:
    """NaN → null (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_explanation(explanation: PairExplanation, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"explain_{_slug(explanation.pair.item_id)}"
    written = [out_dir / f"{stem}.json"]
    written[0].write_text(json.dumps(_json_safe(explanation.to_dict()), indent=1, ensure_ascii=False))
    for letter in explanation.letters:
        written.append(plot_pair(explanation, letter, out_dir / f"{stem}_{letter}.png"))
    return written


def _visible(token: str) -> str:
    """The token without surrounding spaces, unless it is only whitespace (then as it is, shown with repr)."""
    return token.strip() or token


def summary_rows(explanations: list[PairExplanation]) -> list[dict[str, Any]]:
    rows = []
    for e in explanations:
        for letter in e.letters:
            s = e.summary[letter]
            entity = e.to_dict()["entity"]
            rows.append({
                "item": e.pair.item_id, "explained": letter, "key": e.key, "substituted_option": e.victim,
                "entity": f"{entity['clean']} -> {entity['attacked']}",
                "prediction": f"{e.predicted['clean']} -> {e.predicted['attacked']}",
                "substituted_option_share": [s["substituted_option_share"]["clean"],
                                             s["substituted_option_share"]["attacked"]],
                "key_rank": [s["key_rank"]["clean"], s["key_rank"]["attacked"]],
                "entity_rank": [s["entity_rank"]["clean"], s["entity_rank"]["attacked"]],
                "spearman_rho": s["spearman_rho"],
                "top1": [_visible(e.profiles[letter][side]["top1"]["token"]) for side in ("clean", "attacked")],
            })
    return rows


def _pair(values: list[Any], fmt: str = "{}") -> str:
    return " → ".join("–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)
                      for v in values)


def write_summary(explanations: list[PairExplanation], out_dir: Path) -> list[Path]:
    rows = summary_rows(explanations)
    out_dir.mkdir(parents=True, exist_ok=True)
    as_json = out_dir / "explain_summary.json"
    as_json.write_text(json.dumps(_json_safe(rows), indent=1, ensure_ascii=False))
    lines = [
        "| item | explained | key | substituted | entity | prediction | share of substituted option | key rank | "
        "entity rank | Spearman ρ (shared tokens) | top-1 token |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['item']} | {r['explained']} | {r['key']} | {r['substituted_option']} | {r['entity']} | "
            f"{r['prediction']} | {_pair(r['substituted_option_share'], '{:.3f}')} | {_pair(r['key_rank'])} | "
            f"{_pair(r['entity_rank'])} | {_pair([r['spearman_rho']], '{:.2f}')} | "
            f"{_pair([repr(t) for t in r['top1']])} |")
    as_md = out_dir / "explain_summary.md"
    as_md.write_text("\n".join(lines) + "\n")
    return [as_json, as_md]
