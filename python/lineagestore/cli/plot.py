"""``lineagestore inspect --plot``: the lineage of every store drawn with matplotlib (imported lazily)."""

from __future__ import annotations

from typing import Any

from lineagestore._extras import MissingExtra as MissingDependency
from lineagestore._extras import require
from lineagestore.cli.render import rewrite_text

__all__ = ["MissingDependency", "damage_kind", "lineage_figure", "plot_lineage", "require_matplotlib"]


def require_matplotlib() -> Any:
    """matplotlib's pyplot drawing into files only, or ``MissingDependency`` naming the ``plot`` extra."""
    matplotlib = require("matplotlib", "lineagestore inspect --plot")
    matplotlib.use("Agg")  # files only, never a window
    return require("matplotlib.pyplot", "lineagestore inspect --plot")


_STATUS_COLOR = {"committed": "#1f77b4", "orphan": "#999999", "pending": "#ff7f0e", "unknown": "#bbbbbb"}
_DAMAGE_COLOR = "#d62728"
_REWRITE_COLOR = "#2ca02c"
# the mark of a damaged checkpoint, by whether a retained committed batch needs the file (inspect's error,
# exit code 1) or none does (inspect's note): a filled cross and a hollow one
_DAMAGE_MARK = {
    "error": {"marker": "X", "ms": 13, "mfc": _DAMAGE_COLOR, "mec": "black", "mew": 0.6},
    "note": {"marker": "X", "ms": 13, "mfc": "none", "mec": _DAMAGE_COLOR, "mew": 1.4},
}
_DAMAGE_LABEL = {
    "error": "damaged, a retained batch needs it (error)",
    "note": "damaged, no retained batch needs it (note)",
}
REWRITE_LABEL = "state rewritten (repartition, migrate)"


def damage_kind(checkpoint: dict) -> str | None:
    """The damage mark of one checkpoint of the report (its ``damaged`` files): "error" when a retained
    committed batch needs one of them, "note" when none does, None when nothing is damaged."""
    damaged = checkpoint.get("damaged") or []
    if not damaged:
        return None
    return "error" if any(d["needed"] for d in damaged) else "note"


def plot_lineage(report: dict, out: str) -> int:
    """Draw :func:`lineage_figure` into the file ``out`` (its format from the name: .png, .svg, .pdf).
    Returns the number of panels."""
    plt = require_matplotlib()
    fig = lineage_figure(report)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return len(report["stores"])


def lineage_figure(report: dict) -> Any:
    """One panel per store: versions on x, attempts of a version stacked on y (the committed attempt at 0),
    deltas as dots, snapshots as large squares, the committed path (the attempt the commit log chose at
    every version) as a thick line, and every other attempt linked to its parent by a dashed line. A
    checkpoint with a damaged file carries a cross (filled: a retained batch needs it; hollow: none does); a
    batch that rewrote the state (``rewrites``: a repartition or a migrate) is a vertical line just before
    its version in every panel, named at the top. The legend names the marks drawn."""
    plt = require_matplotlib()
    stores = report["stores"]
    rewrites = report.get("rewrites", [])
    n = max(1, len(stores))
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.6 + 1.4 * n), squeeze=False, sharex=True)
    for ax, store in zip((a[0] for a in axes), stores, strict=False):
        _panel(ax, store)
        for rw in rewrites:
            ax.axvline(rw["version"] - 0.5, color=_REWRITE_COLOR, ls="-.", lw=1.5, zorder=2, gid="rewrite")
    # whole versions on x, a rewrite line's version before it included (a migrate's often is version 1)
    xs = [c["version"] for s in stores for c in s["checkpoints"]] + [rw["version"] - 1 for rw in rewrites]
    if xs:
        axes[0][0].set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    if not stores:
        axes[0][0].text(0.5, 0.5, "no state stores", ha="center", va="center")
    elif rewrites:
        top = axes[0][0]
        low, high = top.get_xlim()
        for rw in rewrites:
            right_half = rw["version"] - 0.5 > (low + high) / 2  # the label goes where there is room
            top.annotate(
                f"batch {rw['batch']}: {rewrite_text(rw)}",
                (rw["version"] - 0.5, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(-3 if right_half else 3, -3),
                textcoords="offset points",
                ha="right" if right_half else "left",
                va="top",
                fontsize=7,
                color=_REWRITE_COLOR,
                gid="rewrite-label",
            )
    axes[-1][0].set_xlabel("state version (batch id + 1)")
    fig.suptitle(f"lineage of {report['checkpoint']}", fontsize=11)
    handles = [
        plt.Line2D([], [], color=_STATUS_COLOR["committed"], lw=3, label="committed path"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["committed"], label="delta (committed)"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["orphan"], label="orphan attempt"),
        plt.Line2D([], [], marker="o", ls="", color=_STATUS_COLOR["pending"], label="pending attempt"),
        plt.Line2D([], [], marker="s", ls="", mfc="gold", mec="black", ms=10, label="snapshot"),
    ]
    drawn = {damage_kind(c) for s in stores for c in s["checkpoints"]}
    for kind in ("error", "note"):
        if kind in drawn:
            handles.append(plt.Line2D([], [], ls="", label=_DAMAGE_LABEL[kind], **_DAMAGE_MARK[kind]))
    if rewrites and stores:
        handles.append(plt.Line2D([], [], color=_REWRITE_COLOR, ls="-.", lw=1.5, label=REWRITE_LABEL))
    ncol = 5 if len(handles) <= 5 else 4
    rows = -(-len(handles) // ncol)
    height = fig.get_figheight()
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, (0.1 + 0.2 * rows) / height, 1, 0.97))
    return fig


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
        kind = damage_kind(c)
        if kind:
            ax.plot(c["version"], lane[key], ls="", zorder=5, gid=f"damage-{kind}", **_DAMAGE_MARK[kind])
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
    damaged = [damage_kind(c) for c in cps]
    damage = (
        f", {sum(k is not None for k in damaged)} damaged ({damaged.count('error')} needed)"
        if any(damaged)
        else ""
    )
    ax.set_title(
        f"{label}  ({t['deltas']} deltas, {t['snapshots']} snapshots, {t['blobs']} blobs, "
        f"{t['orphanAttempts']} orphan attempts{damage})",
        fontsize=8,
        loc="left",
    )
    ax.grid(axis="x", alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
