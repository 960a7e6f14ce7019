"""``lineagestore inspect`` on an adjunct table (docs/adjunct-tables.md): its versions, its store's size and
the executors' replicas. Reached through ``inspect``, which sees the table's ``_adjunct/`` directory."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from lineagestore.cli.common import EXIT_OK, emit
from lineagestore.cli.render import Page, keep, size


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    emit(args, tools.inspect_adjunct_table(checkpoint.to_uri(args.checkpoint)), render)
    return EXIT_OK


def render(t: dict, width: int | None = None) -> str:
    """``lineagestore inspect`` on an adjunct table: its versions, its store's size and its replicas."""
    page = Page(width)
    st = t["store"]
    vs = t["versions"]
    page.field(
        "adjunct table",
        t["table"] + (" " + keep(f"({t['partitions']} partitions)") if t.get("partitions", 1) > 1 else ""),
        15,
    )
    page.field(
        "versions",
        f"{vs[0]['version']}..{vs[-1]['version']} ({len(vs)} kept)" if vs else "none committed yet",
        15,
    )
    page.field(
        "size",
        f"{size(st['totalBytes'])}: {st['deltas']} deltas ({size(st['deltaBytes'])}), {st['snapshots']} "
        f"snapshots ({size(st['snapshotBytes'])}), {st['sharedBlobs']} shared files ({size(st['sharedBytes'])})",
        15,
    )
    for v in vs:
        batch = keep(f"maintain batch {v['sourceBatchId']}")
        page.line(f"version {v['version']:>6}  {v['uniqueId']}  {batch}", indent="  ", hanging="    ")
    if t["uncommitted"]:
        page.field("uncommitted", ", ".join(t["uncommitted"]) + " (a maintain batch that did not finish)", 15)
    replicas = t.get("replicas") or []
    page.field(
        "replicas", f"{len(replicas)}" + ("" if replicas else " (no lookup has loaded the table yet)"), 15
    )
    for r in replicas:
        loaded = datetime.fromtimestamp(r["loadedAtMs"] / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        behind = "at the latest version" if r["lag"] == 0 else f"{r['lag']} version(s) behind"
        name = r["replica"] + (f" partition {r['partition']}" if "partition" in r else "")
        page.line(
            f"{name:<24} version {r['version']:>6}  {behind}  (loaded {keep(loaded + ' UTC')}; so far "
            f"{r['deltasReplayed']} deltas replayed, {size(r['bytesDownloaded'])} of snapshots downloaded)",
            indent="  ",
            hanging="    ",
        )
    if t.get("partitions", 1) > 1:
        latest = vs[-1]["version"] if vs else 0
        page.field(
            "partitions", "the store checkpoint each holds at the latest version, and its replicas", 15
        )
        for ps in t.get("partitionStates") or []:
            if not ps["checkpoint"]:
                held = "empty (no version wrote a key of it)"
            else:
                held = f"store version {ps['storeVersion']} (named by table versions {ps['since']}..{latest})"
            if ps["maxLag"] is None:
                lag = "no replica has loaded it"
            elif ps["maxLag"] == 0:
                lag = f"{ps['replicas']} replica(s), all at the latest version"
            else:
                lag = (
                    f"{ps['replicas']} replica(s), the furthest {ps['maxLag']} table version(s) "
                    f"({ps['maxStoreLag']} of its store's) behind"
                )
            page.line(f"partition {ps['partition']:>3}  {held}; {lag}", indent="  ", hanging="    ")
        page.line(
            "(a replica's lag is as of its last load: it moves when a lookup asks for a newer version; "
            "whether its executor still runs is not known offline)",
            indent="  ",
            hanging="    ",
        )
    ts = t.get("tombstones")
    if ts:
        floor = "none yet" if ts["floor"] is None else str(ts["floor"])
        page.field(
            "tombstones",
            f"kept for {ts['retention']} ordering units; highest ordering {ts['highestOrdering']}, floor {floor} "
            "(tombstones at or below it are purged, late changes at or below it refused)",
            15,
        )
    return page.text()
