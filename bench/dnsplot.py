"""The DNS benchmark's one picture: per profile, the replicas each setup asked for and the
queries it lost each second, from ``bench/results/dns.json``. Drawn small, for docs/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BIN = 2  # seconds a point of the lost queries spans
STYLES = {"upstream": ("(a) upstream", "#999999", (0, (4, 2))),
          "ours": ("(b) ours", "#1f77b4", "-"),
          "ours_load": ("(c) ours + load", "#2ca02c", "-"),
          "hpa": ("(d) HPA", "#d62728", "-")}


def _binned(per_second: list[int], width: int) -> tuple[list[int], list[float]]:
    """The mean of each ``width`` seconds: the second-by-second noise of a busy machine
    would hide the four runs' differences (the file keeps every second)."""
    starts = list(range(0, len(per_second), width))
    means = [sum(per_second[s:s + width]) / len(per_second[s:s + width]) for s in starts]
    if not means:
        return [], []
    return [*starts, len(per_second)], [*means, means[-1]]


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
    fig, axes = plt.subplots(2, len(profiles), figsize=(4.6 * len(profiles), 2.8),
                             sharex="col", squeeze=False)
    for col, (name, prof) in enumerate(profiles.items()):
        end = sum(p[0] for p in prof["phases"])
        top, bottom = axes[0][col], axes[1][col]
        for key, run in prof["runs"].items():
            label, color, style = STYLES[key]
            times, replicas = _steps(run["replicas"], end)
            top.step(times, replicas, where="post", color=color, linestyle=style,
                     label=label, lw=1.2)
            starts, lost = _binned(run["lost_per_second"], BIN)
            bottom.step(starts, lost, where="post", color=color, linestyle=style, lw=0.9)
        top.set_title(f"{name} (base {doc['base_qps']}/s, x5)", fontsize=8)
        top.set_ylabel("replicas", fontsize=7)
        bottom.set_ylabel(f"lost queries/s ({BIN} s mean)", fontsize=7)
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
