#!/usr/bin/env python3
"""Commit and batch latency at production scale, on an idle and on a busy machine (issue 21).

    python integration-tests/bench/scale.py --out docs/benchmarks/scale                  # every size, local
    python integration-tests/bench/scale.py --sizes 1m-100k-100b,1m-100k-1k --out ...     # a subset
    python integration-tests/bench/scale.py --store s3 --out docs/benchmarks/scale-s3

For each size of ``presets.SCALE_SIZES`` and each mode (``idle``; ``busy``: beside ``--busy`` CPU-bound
processes, default one per core) it runs ``run.py --preset scale`` with lineagestore and Spark's RocksDB
provider (V2, changelog checkpointing) into ``OUT/<size>-<mode>/``, then writes ``OUT/scale.md`` and
``OUT/scale.json``: the issue's four targets (ratios to Spark's provider of the same run) for every size and
mode, the absolute figures beside them, and ``OUT/scale_ratios.png``. Extra arguments after ``--`` go to
every run.py (``-- --rounds 2 --profile-commits``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from presets import SCALE_SIZES  # noqa: E402
from report import FIGURES, PRESET_TARGETS, fmt, fmt_ratio  # noqa: E402

MODES = ("idle", "busy")
TARGETS = PRESET_TARGETS["scale"]
# absolute figures shown beside the targets' ratios
SHOWN = (
    "commit_p50_ms",
    "commit_p99_ms",
    "batch_p95_ms",
    "cpu_s_per_batch",
    "snapshot_upload_ms",
    "peak_rss_bytes",
)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default=",".join(SCALE_SIZES), help=f"comma list of {', '.join(SCALE_SIZES)}")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of idle, busy")
    ap.add_argument("--store", choices=("local", "s3"), default="local")
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="CPU-bound processes in busy mode")
    ap.add_argument("--batches", type=int, help="steady + warm-up batches (default: the scale preset's)")
    ap.add_argument("--report-only", action="store_true", help="rebuild scale.md from the runs in --out")
    args = ap.parse_args(argv)
    args.size_list = [x for x in args.sizes.split(",") if x]
    args.mode_list = [x for x in args.modes.split(",") if x]
    for size in args.size_list:
        if size not in SCALE_SIZES:
            ap.error(f"unknown size {size!r}; the sizes are {', '.join(SCALE_SIZES)}")
    for mode in args.mode_list:
        if mode not in MODES:
            ap.error(f"unknown mode {mode!r}; the modes are {', '.join(MODES)}")
    return args, extra


def run_one(args: argparse.Namespace, extra: list[str], size: str, mode: str, out: Path) -> int:
    overrides = SCALE_SIZES[size]
    cmd = [
        sys.executable,
        str(HERE / "run.py"),
        "--preset",
        "scale",
        "--providers",
        "lineagestore,rocksdb_v2",
        "--store",
        args.store,
        "--out",
        str(out),
        "--keys",
        str(overrides["keys"]),
        "--update-fraction",
        str(overrides["update_fraction"]),
        "--value-bytes",
        str(overrides["value_bytes"]),
        *(["--partitions", str(overrides["partitions"])] if "partitions" in overrides else []),
        *(x for k, v in overrides.get("context_confs", {}).items() for x in ("--context-conf", f"{k}={v}")),
        *(["--busy", str(args.busy)] if mode == "busy" else []),
        *(["--batches", str(args.batches)] if args.batches else []),
        *extra,
    ]
    print(f"== {size} {mode}: {' '.join(cmd[1:])}", flush=True)
    return subprocess.run(cmd).returncode


def collect(root: Path) -> list[dict[str, Any]]:
    """One row per run found under root: size, mode, the targets and the figures of both providers."""
    rows = []
    for size in SCALE_SIZES:
        for mode in MODES:
            path = root / f"{size}-{mode}" / "summary.json"
            if not path.is_file():
                continue
            summary = json.loads(path.read_text())
            entry = summary["workloads"].get("agg", {})
            provs = entry.get("providers", {})
            rows.append(
                {
                    "size": size,
                    "mode": mode,
                    "targets": entry.get("targets", []),
                    "figures": {p: provs[p]["figures"] for p in provs},
                    "ratios": {p: provs[p]["ratios"] for p in provs},
                    "loadavg": summary["meta"]["machine"].get("loadavg_start"),
                    "started": summary["meta"]["started"],
                    "ran": ran_on(summary["meta"]),
                }
            )
    return rows


def ran_on(meta: dict[str, Any]) -> str:
    """When, on which build and CPU, and how many batches: a grid's rows may come from different runs."""
    versions = meta.get("versions", {})
    build = (versions.get("git_head") or "?")[:7] + ("+" if versions.get("jvm_sources_dirty") else "")
    cpu = meta.get("machine", {}).get("cpu", "?").replace("(R)", "").replace(" Processor", "")
    return f"{meta.get('started', '?')[:10]}, {build}, {cpu}, {meta.get('settings', {}).get('batches', '?')} batches"


def markdown(rows: list[dict[str, Any]], store: str) -> str:
    labels = [label for _, _, _, label in TARGETS]
    lines = [
        f"# Scale and busy benchmark (store `{store}`)",
        "",
        "Generated by `integration-tests/bench/scale.py`; each row is one `run.py --preset scale` run "
        "(its own directory has every figure, the CPU by thread group and the plots). Ratios are lineagestore "
        "over Spark's RocksDB provider (V2, changelog checkpointing) in the same run; lower is better.",
        "",
        "| size | mode | " + " | ".join(labels) + " | ran (date, build, CPU, batches) |",
        "|---|---|" + "---|" * (len(labels) + 1),
    ]
    for r in rows:
        cells = []
        for t in r["targets"]:
            met = {True: "", False: " **missed**", None: ""}[t.get("met")]
            cells.append(fmt_ratio(t.get("ratio")) + met)
        lines.append(f"| {r['size']} | {r['mode']} | " + " | ".join(cells) + f" | {r['ran']} |")
    lines += ["", "Figures (lineagestore / Spark's provider):", ""]
    lines += ["| size | mode | " + " | ".join(FIGURES[k][0] for k in SHOWN) + " |"]
    lines += ["|---|---|" + "---|" * len(SHOWN)]
    for r in rows:
        ls, base = r["figures"].get("lineagestore", {}), r["figures"].get("rocksdb_v2", {})
        cells = [f"{fmt(ls.get(k), FIGURES[k][1])} / {fmt(base.get(k), FIGURES[k][1])}" for k in SHOWN]
        lines.append(f"| {r['size']} | {r['mode']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], out: Path) -> str | None:
    try:
        import matplotlib
    except ModuleNotFoundError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [key for key, _, _, _ in TARGETS]
    limits = [threshold for _, _, threshold, _ in TARGETS]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        by_fig = {t["figure"]: t.get("ratio") or 0 for t in r["targets"]}
        xs = [x + i * width for x in range(len(figs))]
        ax.bar(xs, [by_fig.get(f, 0) for f in figs], width, label=f"{r['size']} {r['mode']}")
    for x, limit in enumerate(limits):
        ax.hlines(limit, x - width / 2, x + 0.8 - width / 2, colors="black", linestyles="dashed", lw=1)
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(len(figs))])
    ax.set_xticklabels([label for _, _, _, label in TARGETS], fontsize=7)
    ax.set_title("lineagestore / Spark's RocksDB provider, same run (dashed: the target)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "scale_ratios.png", dpi=80)
    plt.close(fig)
    return "scale_ratios.png"


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    failed = 0
    if not args.report_only:
        t0 = time.monotonic()
        for size in args.size_list:
            for mode in args.mode_list:
                failed += run_one(args, extra, size, mode, root / f"{size}-{mode}") != 0
        print(f"scale runs took {time.monotonic() - t0:.0f} s", flush=True)
    rows = collect(root)
    (root / "scale.json").write_text(json.dumps(rows, indent=1, sort_keys=True))
    md = markdown(rows, args.store)
    png = plot(rows, root)
    if png:
        md += f"\n![ratios]({png})\n"
    (root / "scale.md").write_text(md)
    print(f"wrote {root}/scale.md")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
