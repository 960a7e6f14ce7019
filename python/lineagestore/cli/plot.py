"""``lineagestore inspect --plot``: the lineage of every store drawn with matplotlib (imported lazily)."""

from __future__ import annotations

from typing import Any

from lineagestore._extras import MissingExtra as MissingDependency
from lineagestore._extras import require

__all__ = ["MissingDependency", "plot_lineage", "require_matplotlib"]


def require_matplotlib() -> Any:
    """matplotlib's pyplot drawing into files only, or ``MissingDependency`` naming the ``plot`` extra."""
    matplotlib = require("matplotlib", "lineagestore inspect --plot")
    matplotlib.use("Agg")  # files only, never a window
    return require("matplotlib.pyplot", "lineagestore inspect --plot")


_STATUS_COLOR = {"committed": "#1f77b4", "orphan": "#999999", "pending": "#ff7f0e", "unknown": "#bbbbbb"}


def plot_lineage(report: dict, out: str) -> int:
    """Draw one panel per store: versions on x, attempts of a version stacked on y (the committed attempt at
    0), deltas as dots, snapshots as large squares, the committed path (the attempt the commit log chose at
    every version) as a thick line, and every other attempt linked to its parent by a dashed line. Returns the
    number of panels."""
    plt = require_matplotlib()
    stores = report["stores"]
    n = max(1, len(stores))
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.6 + 1.4 * n), squeeze=False, sharex=True)
    for ax, store in zip((a[0] for a in axes), stores, strict=False):
        _panel(ax, store)
    if not stores:
        axes[0][0].text(0.5, 0.5, "no state stores", ha="center", va="center")
    axes[-1][0].set_xlabel("state version (batch id + 1)")
    fig.suptitle(f"lineage of {report['checkpoint']}", fontsize=11)
    handles = [
        plt.Line2D([], [], color=_STATUS_COLOR["committed"], lw=3, label="committed path"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["committed"], label="delta (committed)"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["orphan"], label="orphan attempt"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["pending"], label="pending attempt"),
        plt.Line2D([], [], marker="s", ls="", mfc="gold", mec="black", ms=10, label="snapshot"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return len(stores)


def _panel(ax: Any, store: dict) -> None:
    cps = store["checkpoints"]
    lane: dict[str, int] = {}
    by_version: dict[int, list[dict]] = {}
    for c in cps:
        by_version.setdefault(c["version"], []).append(c)
    for v, attempts in by_version.items():
        attempts.sort(key=lambda c: (c["status"] != "committed", c["uniqueId"]))
        for i, c in enumerate(attempts):
            lane[f"{v}_{c['uniqueId']}"] = i
    # committed path
    path = sorted(
        (p["version"] for p in store["chosenPath"] if f"{p['version']}_{p['uniqueId']}" in lane), key=int
    )
    if path:
        ax.plot(path, [0] * len(path), color=_STATUS_COLOR["committed"], lw=3, zorder=1)
    # other attempts: dashed edge to their parent
    for c in cps:
        key = f"{c['version']}_{c['uniqueId']}"
        if c["status"] != "committed" and c["ancestors"]:
            parent = c["ancestors"][0]
            if parent in lane:
                ax.plot(
                    [int(parent.split("_", 1)[0]), c["version"]],
                    [lane[parent], lane[key]],
                    ls="--",
                    lw=1,
                    color=_STATUS_COLOR.get(c["status"], "#999999"),
                    zorder=1,
                )
    for c in cps:
        key = f"{c['version']}_{c['uniqueId']}"
        color = _STATUS_COLOR.get(c["status"], "#999999")
        if c["snapshot"]:
            ax.plot(c["version"], lane[key], marker="s", ms=11, mfc="gold", mec="black", zorder=3)
        if c["delta"]:
            ax.plot(c["version"], lane[key], marker="o", ms=6, color=color, zorder=4)
        if lane[key] > 0:
            ax.annotate(
                c["uniqueId"][:8],
                (c["version"], lane[key]),
                fontsize=6,
                xytext=(4, 4),
                textcoords="offset points",
                color=color,
            )
    from matplotlib.ticker import MaxNLocator

    top = max(lane.values(), default=0)
    ax.set_ylim(-0.6, top + 0.6)
    ax.set_yticks(range(top + 1))
    ax.set_yticklabels(["committed"] + [f"attempt {i + 1}" for i in range(top)], fontsize=7)
    label = store["path"]
    t = store["totals"]
    ax.set_title(
        f"{label}  ({t['deltas']} deltas, {t['snapshots']} snapshots, {t['blobs']} blobs, "
        f"{t['orphanAttempts']} orphan attempts)",
        fontsize=8,
        loc="left",
    )
    ax.grid(axis="x", alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
