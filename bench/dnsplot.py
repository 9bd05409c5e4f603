"""The DNS benchmark's one picture: per profile, the replicas each setup asked for and the
queries it lost each second, from ``bench/results/dns.json``. Drawn small, for docs/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STYLES = {"upstream": ("(a) upstream", "#999999", (0, (4, 2))),
          "ours": ("(b) ours", "#1f77b4", "-"),
          "ours_load": ("(c) ours + load", "#2ca02c", "-"),
          "hpa": ("(d) HPA", "#d62728", "-")}


def _steps(changes: list[list[float]], end: float) -> tuple[list[float], list[float]]:
    if not changes:
        return [], []
    xs = [max(0.0, c[0]) for c in changes] + [end]
    ys = [c[1] for c in changes] + [changes[-1][1]]
    return xs, ys


def plot(doc: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = doc["profiles"]
    fig, axes = plt.subplots(2, len(profiles), figsize=(5.0 * len(profiles), 3.2),
                             sharex="col", squeeze=False)
    for col, (name, prof) in enumerate(profiles.items()):
        end = sum(p[0] for p in prof["phases"])
        top, bottom = axes[0][col], axes[1][col]
        for key, run in prof["runs"].items():
            label, color, style = STYLES[key]
            xs, ys = _steps(run["replicas"], end)
            top.step(xs, ys, where="post", color=color, linestyle=style, label=label, lw=1.2)
            lost = run["lost_per_second"]
            bottom.plot(range(len(lost)), lost, color=color, linestyle=style, lw=0.9)
        top.set_title(f"{name} (base {doc['base_qps']}/s, x5)", fontsize=8)
        top.set_ylabel("replicas", fontsize=7)
        bottom.set_ylabel("lost queries/s", fontsize=7)
        bottom.set_xlabel("s", fontsize=7)
        for ax in (top, bottom):
            ax.tick_params(labelsize=6)
            ax.set_xlim(0, end)
    axes[0][0].legend(fontsize=6, frameon=False)
    fig.tight_layout(pad=0.3)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    _palette(out)


def _palette(path: Path) -> None:
    """Rewrite the picture with a few colours: docs/ has a size budget, and four lines
    on white need no more."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=16)
    small.save(path, optimize=True)
