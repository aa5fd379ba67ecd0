"""Side-by-side Shapley heatmaps of a clean and an attacked prompt (the paper's Fig. 5 / App. E), with the
attribution mass per region below.

Tokens are laid out in a monospace font on a character grid (no text measuring, so the layout is the same on
every backend); each token's background is its Shapley value on one diverging scale shared by both panels, the
substituted entity is boxed, and the key and predicted options are marked in the titles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from medfuzz.solvers.tces.explain.pair import PairExplanation
from medfuzz.solvers.tces.explain.shapley import TokenAttribution
from medfuzz.solvers.tces.explain.summary import ENTITY, STEM, QuestionLayout

COLUMNS = 96  # characters per line of a panel
MONO_WIDTH = 0.6  # advance of a monospace glyph, in ems


def _lines(tokens: list[str]) -> list[list[tuple[int, int, int, str]]]:
    """Place each token on the grid: (token index, line, column, visible text); wraps at ``COLUMNS`` and at
    newlines inside tokens. A token's visible text is drawn on one line (a longer one is cut)."""
    placed: list[list[tuple[int, int, int, str]]] = [[]]
    line, column = 0, 0
    for index, token in enumerate(tokens):
        parts = token.split("\n")
        for k, part in enumerate(parts):
            if k > 0:
                line, column = line + 1, 0
                placed.append([])
            text = part.replace("\t", " ")
            if not text:
                continue
            if column + len(text.rstrip()) > COLUMNS and column > 0:
                line, column = line + 1, 0
                placed.append([])
                text = text.lstrip()
            text = text[:COLUMNS]
            placed[line].append((index, line, column, text))
            column += len(text)
    return placed


def _panel(ax: Any, attribution: TokenAttribution, layout: QuestionLayout, output: str, norm: Any, cmap: Any,
           fontsize: float) -> int:
    from matplotlib.patches import Rectangle

    phi = attribution.column(output)
    placed = _lines(attribution.tokens)
    for row in placed:
        for index, line, column, text in row:
            width = len(text)
            lead = len(text) - len(text.lstrip())
            face = cmap(norm(phi[index]))
            ax.add_patch(Rectangle((column + lead, line + 0.08), max(width - lead, 0.5), 0.84,
                                   facecolor=face, edgecolor="none"))
            if layout.in_entity(attribution.spans[index]):
                ax.add_patch(Rectangle((column + lead, line + 0.04), max(width - lead, 0.5), 0.92, fill=False,
                                       edgecolor="black", linewidth=1.4))
            # white on dark cells, black on light ones (relative luminance of the cell colour)
            luminance = 0.2126 * face[0] + 0.7152 * face[1] + 0.0722 * face[2]
            ax.text(column, line + 0.5, text, fontsize=fontsize, family="monospace", va="center", ha="left",
                    color="white" if luminance < 0.45 else "black")
    ax.set_xlim(0, COLUMNS)
    ax.set_ylim(len(placed), 0)
    ax.axis("off")
    return len(placed)


def _title(explanation: PairExplanation, side: str, output: str) -> str:
    attribution = explanation.clean if side == "clean" else explanation.attacked
    probability = explanation.probabilities[side]
    predicted = explanation.predicted[side]
    j = attribution.outputs.index(output)
    entity = explanation.to_dict()["entity"][side]
    logged = (explanation.pair.logged.get("answers") or {}).get(side)
    logged_text = f", logged target answer {logged}" if logged else ""
    return (f"{'Clean' if side == 'clean' else 'Attacked'} (option {explanation.victim}: \u201c{entity}\u201d)\n"
            f"model predicts {predicted} (p = {probability[predicted]:.2f}; key {explanation.key} p = "
            f"{probability[explanation.key]:.2f}){logged_text}\n"
            f"{explanation.output}({output}) = {attribution.full[j]:.2f}, all masked {attribution.base[j]:.2f}")


def plot_pair(explanation: PairExplanation, output: str, path: Path) -> Path:
    """Write the figure for one explained letter to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    limit = max(float(np.abs(explanation.clean.column(output)).max()),
                float(np.abs(explanation.attacked.column(output)).max()), 1e-9)
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit)
    cmap = plt.get_cmap("RdBu_r")
    heights = [len(_lines(a.tokens)) for a in (explanation.clean, explanation.attacked)]
    text_height = 0.22 * max(heights) + 1.2
    fig = plt.figure(figsize=(20, text_height + 3.4))
    grid = fig.add_gridspec(2, 3, height_ratios=[text_height, 3.0], width_ratios=[1, 1, 0.025], hspace=0.25,
                            wspace=0.05)
    panels = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])]
    panel_width_pt = panels[0].get_position().width * fig.get_figwidth() * 72
    fontsize = min(9.0, panel_width_pt / (COLUMNS * MONO_WIDTH))
    for ax, side in zip(panels, ("clean", "attacked"), strict=True):
        attribution = explanation.clean if side == "clean" else explanation.attacked
        layout = explanation.clean_layout if side == "clean" else explanation.attacked_layout
        _panel(ax, attribution, layout, output, norm, cmap, fontsize)
        ax.set_title(_title(explanation, side, output), fontsize=10, loc="left")
    bar = fig.add_subplot(grid[0, 2])
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=bar, label=f"Shapley value of {output}")

    shares = fig.add_subplot(grid[1, 0:2])
    regions = [STEM, *explanation.clean_layout.options, ENTITY]
    labels = ["stem", *(f"option {r}" + (" (key)" if r == explanation.key else "") +
                        (" (substituted)" if r == explanation.victim else "")
                        for r in explanation.clean_layout.options), "entity span"]
    x = np.arange(len(regions))
    for offset, side, color in ((-0.2, "clean", "#4c72b0"), (0.2, "attacked", "#dd8452")):
        values = [explanation.profiles[output][side]["share"][r] for r in regions]
        shares.bar(x + offset, values, width=0.4, label=side, color=color)
    shares.set_xticks(x, labels)
    shares.set_ylabel("share of \u03a3|\u03c6|")
    summary = explanation.summary[output]
    shares.set_title(f"Attribution mass per region · key rank {summary['key_rank']['clean']} \u2192 "
                     f"{summary['key_rank']['attacked']}, entity rank {summary['entity_rank']['clean']} \u2192 "
                     f"{summary['entity_rank']['attacked']}, Spearman \u03c1 on shared tokens "
                     f"{summary['spearman_rho']:.2f} (n = {summary['shared_tokens']})", fontsize=10)
    shares.legend(frameon=False)
    shares.spines[["top", "right"]].set_visible(False)
    fig.suptitle(f"Item {explanation.pair.item_id} · {explanation.model} · token-wise Shapley values (shap "
                 f"Partition, max_evals = {explanation.clean.max_evals}) of {explanation.output}({output})",
                 fontsize=12, x=0.01, y=1.03, ha="left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
