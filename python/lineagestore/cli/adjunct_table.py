"""``lineagestore inspect`` on an adjunct table (docs/adjunct-tables.md): its versions, its store's size and
the executors' replicas. Reached through ``inspect``, which sees the table's ``_adjunct/`` directory."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from lineagestore._units import human_bytes as hb
from lineagestore.cli.common import EXIT_OK, emit


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    emit(args, tools.inspect_adjunct_table(checkpoint.to_uri(args.checkpoint)), render)
    return EXIT_OK


def render(t: dict) -> str:
    """``lineagestore inspect`` on an adjunct table: its versions and its store's size."""
    st = t["store"]
    vs = t["versions"]
    out = [
        f"adjunct table  {t['table']}"
        + (f" ({t['partitions']} partitions)" if t.get("partitions", 1) > 1 else ""),
        "versions       "
        + (f"{vs[0]['version']}..{vs[-1]['version']} ({len(vs)} kept)" if vs else "none committed yet"),
        f"size           {hb(st['totalBytes'])}: {st['deltas']} deltas ({hb(st['deltaBytes'])}), "
        f"{st['snapshots']} snapshots ({hb(st['snapshotBytes'])}), {st['sharedBlobs']} shared files "
        f"({hb(st['sharedBytes'])})",
    ]
    for v in vs:
        out.append(f"  version {v['version']:>6}  {v['uniqueId']}  maintain batch {v['sourceBatchId']}")
    if t["uncommitted"]:
        out.append(
            "uncommitted    " + ", ".join(t["uncommitted"]) + " (a maintain batch that did not finish)"
        )
    replicas = t.get("replicas") or []
    out.append(
        f"replicas       {len(replicas)}" + ("" if replicas else " (no lookup has loaded the table yet)")
    )
    for r in replicas:
        loaded = datetime.fromtimestamp(r["loadedAtMs"] / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        behind = "at the latest version" if r["lag"] == 0 else f"{r['lag']} version(s) behind"
        name = r["replica"] + (f" partition {r['partition']}" if "partition" in r else "")
        out.append(
            f"  {name:<24} version {r['version']:>6}  {behind}  (loaded {loaded} UTC; so far "
            f"{r['deltasReplayed']} deltas replayed, {hb(r['bytesDownloaded'])} of snapshots downloaded)"
        )
    return "\n".join(out)
