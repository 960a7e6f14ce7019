#!/usr/bin/env python3
"""Figures, ratios, targets, markdown and plots from a benchmark's results.json.

    python integration-tests/bench/report.py docs/benchmarks/<name>     # re-create the report

Per cell (one provider x workload x round) the figures below are computed; over rounds the median is taken;
every figure of every provider is divided by the baseline's (Spark's RocksDB provider, format V2) of the
same run. "steady" means the batches after the load batch and the warm-up batches.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

OPS = ("PUT", "GET", "LIST", "DELETE", "RENAME", "HEAD")

# name -> (label, unit); the order of the tables
FIGURES: dict[str, tuple[str, str]] = {
    "batch_p50_ms": ("batch duration p50", "ms"),
    "batch_p95_ms": ("batch duration p95", "ms"),
    "commit_p50_ms": ("state commit p50", "ms"),
    "commit_p95_ms": ("state commit p95", "ms"),
    "commit_p99_ms": ("state commit p99", "ms"),
    "commit_delta_p50_ms": ("state commit p50: ending the delta", "ms"),
    "commit_apply_wait_p50_ms": ("state commit p50: waiting for the apply thread", "ms"),
    "cpu_s_per_batch": ("JVM CPU per batch (all threads)", "s"),
    "cpu_us_per_row": ("JVM CPU per committed row", "us"),
    "server_cpu_s_per_batch": ("S3 server CPU per batch (its process, on the same cores)", "s"),
    "machine_idle_s_per_batch": ("machine's idle + I/O-wait core seconds per batch", "s"),
    "snapshot_upload_ms": ("snapshot upload (median per store)", "ms"),
    "put_bytes_per_batch": ("bytes written to the store / batch", "B"),
    "requests_per_batch": ("requests to the store / batch", ""),
    "list_per_batch": ("LIST requests / batch", ""),
    "list_idle": ("LIST requests in the idle window", ""),
    "delete_per_batch": ("DELETE requests / batch", ""),
    "cleanup_ms": ("clean-up (median per run)", "ms"),
    "warm_restore_ms": ("warm restore: first batch", "ms"),
    "warm_restore_get_bytes": ("warm restore: bytes read from the store", "B"),
    "cold_restore_ms": ("cold restore: first batch", "ms"),
    "cold_restore_get_bytes": ("cold restore: bytes read from the store", "B"),
    "cold_restore_bytes_per_s": ("cold restore: bytes read / first batch's duration", "B/s"),
    "raw_get_bytes_per_s": ("S3 server: raw parallel-GET throughput, same bytes", "B/s"),
    "cold_restore_fraction_of_raw": ("cold restore throughput / raw parallel-GET throughput", ""),
    "footprint_bytes": ("storage footprint after the run", "B"),
    "footprint_files": ("files in the state directory", ""),
    "peak_rss_bytes": ("peak RSS of the JVM", "B"),
    "state_memory_max_bytes": ("state memory reported (max)", "B"),
}

# (figure, comparison, threshold, label): ratio targets against the baseline, absolute ones on lineagestore
TARGETS = [
    ("batch_p50_ms", "ratio<=", 0.9, "batch duration p50 <= 0.9x"),
    ("commit_p95_ms", "ratio<=", 0.7, "commit p95 <= 0.7x"),
    ("put_bytes_per_batch", "ratio<=", 1.0, "bytes uploaded per batch <= 1.0x"),
    ("list_steady_maintenance", "abs==", 0, "LIST requests in steady-state maintenance = 0"),
    ("warm_restore_get_bytes", "abs==", 0, "warm restore downloads 0 bytes"),
    ("cold_restore_ms", "ratio<=", 0.33, "cold restore <= 0.33x (the issue's: a state >= 1 GB, from S3)"),
    ("cold_restore_fraction_of_raw", "abs>=", 0.7, "cold restore >= 70% of raw parallel-GET throughput"),
    ("footprint_bytes", "ratio<=", 1.0, "storage footprint after the run <= 1.0x"),
]
# Presets with targets of their own (issue 21: production scale, idle and busy)
PRESET_TARGETS = {
    "scale": [
        ("commit_p95_ms", "ratio<=", 0.5, "commit p95 <= 0.5x"),
        ("batch_p50_ms", "ratio<=", 0.8, "batch duration p50 <= 0.8x"),
        ("cpu_us_per_row", "ratio<=", 1.0, "CPU per committed row <= 1.0x"),
        ("put_bytes_per_batch", "ratio<=", 1.0, "bytes written per batch <= 1.0x"),
    ]
}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def stores_per_partition(workload: str) -> int:
    return 4 if workload == "join" else 1


def cell_figures(cell: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The figures of one finished cell."""
    settings = meta["settings"]
    area = "all" if cell.get("store") == "s3" else "state"
    batches = cell.get("batches", [])
    steady = batches[settings["warmup"] + 1 :]
    n = max(1, cell["steady"]["batches"])
    io = cell["steady"]["io"][area]
    trig = [b["durationMs"].get("triggerExecution", 0) for b in steady]
    commit = [b["state"]["commitTimeMs"] for b in steady]
    cpu = [b["cpu_s"] for b in steady if "cpu_s" in b]
    rows = sum(b["state"]["numRowsUpdated"] + b["state"]["numRowsRemoved"] for b in steady)
    f: dict[str, Any] = {
        "batch_p50_ms": _pct(trig, 0.5),
        "batch_p95_ms": _pct(trig, 0.95),
        "commit_p50_ms": _pct(commit, 0.5),
        "commit_p95_ms": _pct(commit, 0.95),
        "commit_p99_ms": _pct(commit, 0.99),
        "cpu_s_per_batch": _median(cpu),
        "server_cpu_s_per_batch": _median([b["server_cpu_s"] for b in steady if "server_cpu_s" in b]),
        "machine_idle_s_per_batch": _median(
            [
                b["machine_cpu_s"].get("idle", 0) + b["machine_cpu_s"].get("iowait", 0)
                for b in steady
                if b.get("machine_cpu_s")
            ]
        ),
        "cpu_us_per_row": sum(cpu) / rows * 1e6 if cpu and rows else None,
        "cpu_by_thread": dict(cell["steady"].get("cpu_by_thread", {})),
        "put_bytes_per_batch": io["put_bytes"] / n,
        "get_bytes_per_batch": io["get_bytes"] / n,
        "requests_per_batch": sum(io[op] for op in OPS) / n,
        "requests_by_type": {op: io[op] / n for op in OPS},
        "list_per_batch": io["LIST"] / n,
        "list_idle": cell["idle"]["io"][area]["LIST"],
        "list_steady_maintenance": io["LIST"] + cell["idle"]["io"][area]["LIST"],
        "delete_per_batch": io["DELETE"] / n,
        "put_bytes_by_kind": {k: v / n for k, v in cell["steady"]["put_bytes_by_kind"][area].items()},
        "footprint_bytes": cell["footprint"]["bytes"],
        "footprint_files": cell["footprint"]["files"],
        "footprint_by_kind": cell["footprint"]["by_kind"],
        "peak_rss_bytes": cell.get("memory", {}).get("VmHWM"),
        "state_memory_max_bytes": max((b["state"]["memoryUsedBytes"] for b in batches), default=None),
        "batch_ms_series": [b["durationMs"].get("triggerExecution", 0) for b in batches],
    }
    # what lineagestore's commits waited on, per steady batch summed over its stores (None for other providers)
    delta = [b["custom"].get("lineagestoreCommitDeltaMs") for b in steady]
    wait = [b["custom"].get("lineagestoreCommitApplyWaitMs") for b in steady]
    split = None not in delta + wait and bool(steady)
    f["commit_delta_p50_ms"] = _pct(delta, 0.5) if split else None
    f["commit_apply_wait_p50_ms"] = _pct(wait, 0.5) if split else None
    f["commit_split_series"] = (
        [[c, d, w] for c, d, w in zip(commit, delta, wait, strict=True)] if split else []
    )
    logs = cell.get("log", {})
    uploads = list(logs.get("snapshot_upload_ms", []))
    if not uploads:  # lineagestore reports the last upload time per store as a metric, not in its log
        n_stores = meta["settings"]["partitions"] * stores_per_partition(cell["workload"])
        prev = None
        for b in steady:
            count = b["custom"].get("lineagestoreSnapshotsUploaded")
            if count is not None and prev is not None and count > prev:
                uploads.append(b["custom"].get("lineagestoreSnapshotUploadMs", 0) / n_stores)
            prev = count
    f["snapshot_upload_ms"] = _median(uploads)
    f["snapshot_uploads_seen"] = len(uploads)
    f["cleanup_ms"] = _median(logs.get("cleanup_ms", []))
    for phase in ("warm", "cold"):
        rec = cell.get("restore", {}).get(phase)
        if rec:
            f[f"{phase}_restore_ms"] = rec["durationMs"].get("triggerExecution")
            f[f"{phase}_restart_ms"] = rec.get("restart_ms")
            f[f"{phase}_restore_get_bytes"] = rec["io"][area]["get_bytes"]
            f[f"{phase}_restore_get_requests"] = rec["io"][area]["GET"]
            f[f"{phase}_restore_list_requests"] = rec["io"][area]["LIST"]
    # every cell has every figure; the raw parallel-GET throughput exists on S3 only (None elsewhere)
    cold = cell.get("restore", {}).get("cold") or {}
    raw = (cold.get("raw_get") or {}).get("bytes_per_s")
    f["cold_restore_bytes_per_s"] = f["raw_get_bytes_per_s"] = f["cold_restore_fraction_of_raw"] = None
    if cold and f.get("cold_restore_ms"):
        f["cold_restore_bytes_per_s"] = f["cold_restore_get_bytes"] / (f["cold_restore_ms"] / 1000)
        if raw:
            f["raw_get_bytes_per_s"] = raw
            f["cold_restore_fraction_of_raw"] = f["cold_restore_bytes_per_s"] / raw
    return f


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    meta, cells = data["meta"], data["cells"]
    baseline = meta["baseline"]
    per: dict[str, dict[str, list[dict[str, Any]]]] = {}
    status: dict[str, dict[str, dict[str, Any]]] = {}
    for c in cells:
        st = status.setdefault(c["workload"], {}).setdefault(c["provider"], {"ok": 0, "errors": []})
        if c.get("status") == "ok":
            st["ok"] += 1
            per.setdefault(c["workload"], {}).setdefault(c["provider"], []).append(cell_figures(c, meta))
        else:
            st["errors"].append(f"{c.get('status')}: {c.get('error', '')}"[:600])
    workloads: dict[str, Any] = {}
    for w in meta["workloads"]:
        provs: dict[str, Any] = {}
        for p in meta["providers"]:
            figs = per.get(w, {}).get(p, [])
            if not figs:
                continue
            med: dict[str, Any] = {}
            for key, value in figs[0].items():
                if isinstance(value, int | float) or value is None:
                    med[key] = _median([f[key] for f in figs])
                elif isinstance(value, dict):
                    keys = sorted({k for f in figs for k in f[key]})
                    if all(isinstance(figs[0][key].get(k, 0), int | float) for k in keys):
                        med[key] = {k: _median([f[key].get(k, 0) for f in figs]) for k in keys}
                    else:
                        med[key] = value
                else:
                    med[key] = value  # series: the first round's
            provs[p] = {"figures": med, "rounds": len(figs)}
        base = provs.get(baseline, {}).get("figures")
        for _p, entry in provs.items():
            entry["ratios"] = {}
            if base:
                for key in FIGURES:
                    v, b = entry["figures"].get(key), base.get(key)
                    if v is not None and b:
                        entry["ratios"][key] = v / b
                    elif v == 0 and b == 0:
                        entry["ratios"][key] = 1.0
        targets = []
        ls = provs.get("lineagestore")
        for key, cmp, threshold, label in PRESET_TARGETS.get(meta["preset"], TARGETS):
            row: dict[str, Any] = {"target": label, "figure": key}
            if ls is None:
                row.update(met=None, note="lineagestore did not run")
            elif cmp == "abs==":
                value = ls["figures"].get(key)
                row.update(value=value, met=value == threshold)
            elif cmp == "abs>=":
                value = ls["figures"].get(key)
                row.update(value=value, met=None if value is None else value >= threshold)
            else:
                ratio = ls["ratios"].get(key)
                row.update(
                    value=ls["figures"].get(key),
                    baseline=(base or {}).get(key),
                    ratio=ratio,
                    met=None if ratio is None else ratio <= threshold,
                )
            targets.append(row)
        workloads[w] = {"providers": provs, "targets": targets, "status": status.get(w, {})}
    return {"meta": meta, "workloads": workloads}


# ------------------------------------------------------------------------------------------- markdown
def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit in ("B", "B/s"):
        v = float(value)
        per = "/s" if unit == "B/s" else ""
        for u in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or u == "GiB":
                return f"{v:.0f} {u}{per}" if u == "B" else f"{v:.1f} {u}{per}"
            v /= 1024
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def fmt_ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}x"


def markdown(summary: dict[str, Any]) -> str:
    meta = summary["meta"]
    s, m, v = meta["settings"], meta["machine"], meta["versions"]
    lines = [
        f"# Benchmark results: preset `{meta['preset']}`, store `{meta['store']}`",
        "",
        f"Generated by `integration-tests/bench/run.py` ({meta['started']}, {meta['wall_seconds']:.0f} s wall).",
        f"Command: `{meta['command']}`. Ratios are to `{meta['baseline']}` in the same run (lower is better).",
        "",
        "## Machine, versions, settings",
        "",
        f"- machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {fmt(m.get('memory_bytes'), 'B')} RAM, "
        f"{m.get('platform')}; load average at start {', '.join(f'{x:.1f}' for x in m.get('loadavg_start', []))}"
        f", at end {', '.join(f'{x:.1f}' for x in m.get('loadavg_end', []))} (the machine was shared)",
        f"- versions: Spark {v.get('spark-sql_2.13', '?')} (PySpark {v.get('pyspark')}), "
        f"Hadoop {v.get('hadoop-client-api', '?')}, rocksdbjni {v.get('rocksdbjni', '?')}, {v.get('java', '?')}, "
        f"Python {m.get('python')}; `{v.get('lineagestore_jar')}` sha256 `{v.get('jar_sha256', '')[:12]}` "
        f"(git {v.get('git_head', '?')[:10]}{', uncommitted changes to the jar sources' if v.get('jvm_sources_dirty') else ''})",
        f"- sizes: {s['keys']:,} keys"
        f"{' with ' + fmt(s['value_bytes'], 'B') + ' of payload each' if s.get('value_bytes') else ''}, "
        f"{s['update_fraction']:.0%} of them updated per batch "
        f"({int(s['keys'] * s['update_fraction']):,} rows), transformWithState {s['tws_keys']:,} keys; "
        f"1 load batch + {s['batches']} batches ({s['warmup']} warm-up), {s['rounds']} round(s), "
        f"local[{meta.get('cores', 2)}], {s['partitions']} shuffle partitions",
        f"- state store settings (all providers): {', '.join(f'`{k}={x}`' for k, x in meta['spark_confs'].items())}; "
        "RocksDB providers with changelog checkpointing; idle window "
        f"{s['idle_s']} s",
    ]
    if meta.get("busy"):
        lines.append(
            f"- **busy**: every cell ran beside {meta['busy']} CPU-bound processes of the benchmark's own "
            "(`--busy`, busy.py), the same load for every provider"
        )
    limit = (meta.get("s3") or {}).get("stream_limit_bytes_per_s")
    if limit:
        lines.append(
            f"- S3 server behind a per-connection limit of {limit / 1e6:g} MB/s (`--s3-stream-limit`, "
            "as S3 limits one GET stream); every client and the raw-GET measurement go through it"
        )
    lines.append("")
    for w, entry in summary["workloads"].items():
        provs = entry["providers"]
        names = [p for p in meta["providers"] if p in provs]
        lines += [f"## Workload `{w}`", ""]
        for p, st in entry["status"].items():
            for e in st["errors"]:
                lines.append(f"- `{p}` did not run: {e.splitlines()[0][:300]}")
        if entry["status"] and any(st["errors"] for st in entry["status"].values()):
            lines.append("")
        if not names:
            continue
        if entry["targets"] and "lineagestore" in provs:
            lines += ["| target | lineagestore | baseline | ratio | met |", "|---|---|---|---|---|"]
            for t in entry["targets"]:
                unit = FIGURES.get(t["figure"], ("", ""))[1]
                met = {True: "yes", False: "**no**", None: "–"}[t.get("met")]
                lines.append(
                    f"| {t['target']} | {fmt(t.get('value'), unit)} | {fmt(t.get('baseline'), unit)} | "
                    f"{fmt_ratio(t.get('ratio'))} | {met} |"
                )
            lines.append("")
        lines += ["| figure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for key, (label, unit) in FIGURES.items():
            cells = []
            for p in names:
                value = provs[p]["figures"].get(key)
                ratio = provs[p]["ratios"].get(key)
                text = fmt(value, unit)
                if p != meta["baseline"] and ratio is not None:
                    text += f" ({fmt_ratio(ratio)})"
                cells.append(text)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += ["", "Requests to the store per steady batch, by type (RENAME is COPY + DELETE on S3):", ""]
        lines += [
            "| provider | " + " | ".join(OPS) + " | bytes written by kind |",
            "|---|" + "---|" * (len(OPS) + 1),
        ]
        for p in names:
            f = provs[p]["figures"]
            kinds = ", ".join(f"{k} {fmt(b, 'B')}" for k, b in sorted(f["put_bytes_by_kind"].items()) if b)
            lines.append(
                f"| {p} | " + " | ".join(fmt(f["requests_by_type"][op]) for op in OPS) + f" | {kinds} |"
            )
        lines.append("")
        lines += thread_cpu_table(names, provs, steady_batches=s["batches"] - s["warmup"])
    return "\n".join(lines)


def thread_cpu_table(names: list[str], provs: dict[str, Any], steady_batches: int, top: int = 8) -> list[str]:
    """Where each provider's JVM spent its CPU in the steady window: seconds per batch of the thread groups
    that used the most (measure.thread_cpu; Linux keeps 15 characters of a thread's name)."""
    per = {p: provs[p]["figures"].get("cpu_by_thread") or {} for p in names}
    if not any(per.values()):
        return []
    totals: dict[str, float] = {}
    for groups in per.values():
        for g, v in groups.items():
            totals[g] = max(totals.get(g, 0.0), v)
    rows = sorted(totals, key=totals.get, reverse=True)[:top]
    n = max(1, steady_batches)
    lines = [
        "JVM CPU seconds per steady batch by thread group (the busiest, of the threads alive at the window's "
        "end: a thread that ended within it, such as a task thread Spark retired, is missing; the JVM's whole "
        "CPU is the figure above, and `--profiler cpu` counts every thread):",
        "",
        "| thread group | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for g in rows:
        lines.append(f"| `{g}` | " + " | ".join(f"{per[p].get(g, 0.0) / n:.3f}" for p in names) + " |")
    lines.append(
        "| all live threads | " + " | ".join(f"{sum(per[p].values()) / n:.3f}" for p in names) + " |"
    )
    return [*lines, ""]


def write_all(out: Path, plots: bool = True) -> dict[str, Any]:
    """Reads out/results.json; writes summary.json, results.md and (optionally) the PNG plots."""
    data = json.loads((out / "results.json").read_text())
    summary = summarize(data)
    if plots:
        from plots import make_plots  # matplotlib only when plotting

        summary["plots"] = make_plots(summary, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    md = markdown(summary)
    if summary.get("plots"):
        md += "\n## Plots\n\n" + "\n".join(f"![{p}]({p})" for p in summary["plots"]) + "\n"
    (out / "results.md").write_text(md)
    return summary


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    write_all(target, plots="--no-plots" not in sys.argv)
    print(f"wrote {target}/summary.json and results.md")
