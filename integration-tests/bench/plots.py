"""The PNG plots of a benchmark's summary (report.py computes the summary): batch durations, the figures
against the baseline, store I/O, restore and footprint. Needs matplotlib, imported only when plotting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import OPS

SHORT = {
    "batch_p50_ms": "batch p50",
    "commit_p95_ms": "commit p95",
    "put_bytes_per_batch": "bytes written/batch",
    "requests_per_batch": "requests/batch",
    "cold_restore_ms": "cold restore",
    "footprint_bytes": "footprint",
    "peak_rss_bytes": "peak RSS",
}
COLORS = {"lineagestore": "#1b9e77", "rocksdb_v2": "#d95f02", "rocksdb_v1": "#7570b3", "hdfs": "#999999"}


def make_plots(summary: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = summary["meta"]
    wl = [w for w, e in summary["workloads"].items() if e["providers"]]
    if not wl:
        return []
    written = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        written.append(name)

    # 1. ratios to the baseline
    keys = [
        "batch_p50_ms",
        "commit_p95_ms",
        "put_bytes_per_batch",
        "requests_per_batch",
        "cold_restore_ms",
        "footprint_bytes",
        "peak_rss_bytes",
    ]
    fig, axes = plt.subplots(len(wl), 1, figsize=(10, 2.6 * len(wl)), squeeze=False)
    for ax, w in zip(axes[:, 0], wl, strict=True):
        provs = summary["workloads"][w]["providers"]
        others = [p for p in meta["providers"] if p in provs and p != meta["baseline"]]
        width = 0.8 / max(1, len(others))
        for i, p in enumerate(others):
            vals = [provs[p]["ratios"].get(k) or 0 for k in keys]
            xs = [x + i * width for x in range(len(keys))]
            ax.bar(xs, vals, width, label=p, color=COLORS.get(p))
            for x, v in zip(xs, vals, strict=True):
                if v:
                    ax.annotate(f"{v:.2f}", (x, v), ha="center", va="bottom", fontsize=6)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks([x + width * (len(others) - 1) / 2 for x in range(len(keys))])
        ax.set_xticklabels([SHORT[k] for k in keys], fontsize=7)
        ax.set_title(f"{w}: ratio to {meta['baseline']} (log scale, lower is better)", fontsize=9)
        if others:
            ax.legend(fontsize=7)
    save(fig, "ratios.png")

    # 2. batch duration per batch
    fig, axes = plt.subplots(len(wl), 1, figsize=(10, 2.4 * len(wl)), squeeze=False)
    for ax, w in zip(axes[:, 0], wl, strict=True):
        provs = summary["workloads"][w]["providers"]
        for p in meta["providers"]:
            if p in provs:
                series = provs[p]["figures"]["batch_ms_series"]
                ax.plot(range(len(series)), series, label=p, color=COLORS.get(p), lw=1)
        ax.set_yscale("log")
        ax.set_title(f"{w}: batch duration (triggerExecution, ms) per batch; batch 0 loads", fontsize=9)
        ax.legend(fontsize=7)
    save(fig, "batch_duration.png")

    # 3. bytes written per batch by kind, and requests per batch by type
    fig, axes = plt.subplots(len(wl), 2, figsize=(11, 2.6 * len(wl)), squeeze=False)
    for row, w in zip(axes, wl, strict=True):
        provs = summary["workloads"][w]["providers"]
        names = [p for p in meta["providers"] if p in provs]
        kinds = sorted({k for p in names for k in provs[p]["figures"]["put_bytes_by_kind"]})
        bottom = [0.0] * len(names)
        for k in kinds:
            vals = [provs[p]["figures"]["put_bytes_by_kind"].get(k, 0) / 1024 for p in names]
            row[0].bar(names, vals, bottom=bottom, label=k)
            bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
        row[0].set_title(f"{w}: KiB written to the store per batch, by file kind", fontsize=9)
        row[0].legend(fontsize=6)
        row[0].tick_params(labelsize=7)
        width = 0.8 / max(1, len(names))
        for i, p in enumerate(names):
            vals = [provs[p]["figures"]["requests_by_type"][op] for op in OPS]
            row[1].bar([x + i * width for x in range(len(OPS))], vals, width, label=p, color=COLORS.get(p))
        row[1].set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(OPS))])
        row[1].set_xticklabels(OPS, fontsize=7)
        row[1].set_title(f"{w}: requests per batch by type", fontsize=9)
        row[1].legend(fontsize=6)
    save(fig, "store_io.png")

    # 4. restore and footprint
    fig, axes = plt.subplots(len(wl), 2, figsize=(11, 2.6 * len(wl)), squeeze=False)
    for row, w in zip(axes, wl, strict=True):
        provs = summary["workloads"][w]["providers"]
        names = [p for p in meta["providers"] if p in provs]
        width = 0.38
        for i, phase in enumerate(("warm", "cold")):
            vals = [provs[p]["figures"].get(f"{phase}_restore_ms") or 0 for p in names]
            row[0].bar([x + i * width for x in range(len(names))], vals, width, label=f"{phase} restore")
        row[0].set_xticks([x + width / 2 for x in range(len(names))])
        row[0].set_xticklabels(names, fontsize=7)
        row[0].set_title(f"{w}: first batch after restart (ms)", fontsize=9)
        row[0].legend(fontsize=6)
        kinds = sorted({k for p in names for k in provs[p]["figures"]["footprint_by_kind"]})
        bottom = [0.0] * len(names)
        for k in kinds:
            vals = [
                provs[p]["figures"]["footprint_by_kind"].get(k, {}).get("bytes", 0) / 2**20 for p in names
            ]
            row[1].bar(names, vals, bottom=bottom, label=k)
            bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
        row[1].set_title(f"{w}: state directory after the run (MiB), by kind", fontsize=9)
        row[1].legend(fontsize=6)
        row[1].tick_params(labelsize=7)
    save(fig, "restore_footprint.png")
    return written
