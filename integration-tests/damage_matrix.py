"""The damage matrix of issue 46: every kind of state file, damaged in every region, on every filesystem, for
lineagestore and for Spark's own RocksDB provider (the comparison). ``test_damage_matrix.py`` runs it.

A case is (provider, filesystem, kind, region). The files are those of partition 0 of operator 0 of a
committed ``groupBy(k).count()`` checkpoint whose lineage is versions 1..5 with snapshots at 2 and 4 (both
providers, ``minDeltasForSnapshot=2``); the resumed query loads version 5. Kinds, named by what they are to
each provider:

=========  =====================================  ==============================================
kind       lineagestore                           Spark's RocksDB provider
=========  =====================================  ==============================================
delta      the newest ``.delta`` (version 5)      the newest ``.changelog`` (version 5)
zip        the newest snapshot ``.zip`` (4)       the newest ``.zip`` (4)
INDEX      its ``INDEX`` entry                    its ``metadata`` entry (Spark's index)
SST        a ``shared/*.sst`` only that zip uses  an ``SSTs/*.sst`` only that zip's metadata lists
no route   zip 4's INDEX and delta 3              zip 4's metadata and changelog 3
=========  =====================================  ==============================================

Regions of a zip are those of its MANIFEST entry (local header, name, records, a zeroed range) and of the
zip itself (central directory, end record, a cut); of an INDEX its local header (the name length, the extra
length), its name and its records; of a delta its header, records and footer (the last bytes) and a cut; of an SST its first data
block, its footer and a cut. Filesystems: the local filesystem with Hadoop's ``.crc`` sidecar kept (what a
disk fault leaves: the sidecar holds the old checksums), the same with the sidecar dropped (only the
provider's own checks can see it), and ``s3a://`` (real MinIO; no sidecars). Files are damaged in place
(local) or rewritten with the damaged bytes through the S3 API (boto3), never through the provider.

Route: a cold load of version 5 has a route around the damage if an undamaged snapshot at ``s`` (or the empty
state, ``s = 0``) and undamaged deltas ``s+1..5`` remain (every delta is retained: 5 batches are far inside
``minBatchesToRetain``). Where one exists lineagestore must give exact results; where none does, its named
error (``NoRouteException``, or ``CorruptCheckpointFileException`` naming the one delta every route needs).
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROVIDERS = ("lineagestore", "builtin")
LOCAL_CRC_KEPT, LOCAL_CRC_DROPPED, S3A = "local, .crc kept", "local, .crc dropped", "s3a"
FILESYSTEMS = (LOCAL_CRC_KEPT, LOCAL_CRC_DROPPED, S3A)
HEAD = 5  # the version the resumed query loads
SNAPSHOTS = (2, 4)  # the versions whose snapshots the baseline waits for
NEWEST_SNAPSHOT = SNAPSHOTS[-1]

_V2 = re.compile(r"^(\d+)_[A-Za-z0-9-]+\.(delta|changelog|zip)$")


# ------------------------------------------------------------------------------------------------- files
@dataclass(frozen=True)
class StateFile:
    """One file of a checkpoint copy: a local path (with the sidecar rule of its filesystem) or an S3 object
    (``lineagestore.testing.faults.S3Object``)."""

    target: Any  # Path | S3Object
    keep_crc: bool = True

    @property
    def name(self) -> str:
        return self.target.name

    def read(self) -> bytes:
        return self.target.read_bytes()

    def write(self, data: bytes) -> None:
        if isinstance(self.target, Path):
            sidecar = self.target.with_name(f".{self.target.name}.crc")
            if not self.keep_crc:
                sidecar.unlink(missing_ok=True)
            elif not sidecar.is_file():
                raise AssertionError(f"{self.target} has no .crc sidecar to keep")
            with open(self.target, "r+b") as out:  # in place: the sidecar keeps the checksums as written
                out.write(data)
                out.truncate(len(data))
        else:
            self.target.write_bytes(data)


@dataclass(frozen=True)
class StoreFiles:
    """The files of one store (partition 0) of a checkpoint copy, by what they are to its provider."""

    provider: str
    deltas: dict[int, StateFile]  # version -> .delta / .changelog
    zips: dict[int, StateFile]  # version -> .zip
    ssts: dict[str, StateFile]  # shared name (lineagestore: shared/<blob>; builtin: SSTs/<name>) -> file

    def zip_ssts(self, version: int) -> set[str]:
        """The shared SST names the snapshot of ``version`` references (from its INDEX / metadata)."""
        data = self.zips[version].read()
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            if self.provider == "lineagestore":
                lines = z.read("INDEX").decode().splitlines()
                return {f[5] for f in (line.split(" ") for line in lines) if f[0] == "file" and f[5] != "-"}
            meta = z.read("metadata").decode().split("\n", 1)[1]
            return {f["dfsSstFileName"] for f in json.loads(meta)["sstFiles"]}

    def own_sst(self, version: int) -> str:
        """An SST only the snapshot of ``version`` references (the one its upload added)."""
        others = set().union(*(self.zip_ssts(v) for v in self.zips if v != version))
        own = sorted(self.zip_ssts(version) - others)
        assert own, f"{self.provider}: snapshot {version} shares every SST with an older snapshot"
        return own[0]


def store_files(provider: str, listing: list[Any], keep_crc: bool) -> StoreFiles:
    """``listing``: the files under ``state/0/0/`` of a copy (``Path`` s or ``S3Object`` s, any depth)."""
    deltas: dict[int, StateFile] = {}
    zips: dict[int, StateFile] = {}
    ssts: dict[str, StateFile] = {}
    delta_ext = "delta" if provider == "lineagestore" else "changelog"
    for f in listing:
        name = f.name
        if name.startswith("."):
            continue
        m = _V2.match(name)
        if m and m.group(2) == delta_ext:
            deltas[int(m.group(1))] = StateFile(f, keep_crc)
        elif m and m.group(2) == "zip":
            zips[int(m.group(1))] = StateFile(f, keep_crc)
        elif name.endswith(".sst"):
            ssts[name] = StateFile(f, keep_crc)
    return StoreFiles(provider, deltas, zips, ssts)


# ----------------------------------------------------------------------------------------- zip structure
@dataclass(frozen=True)
class ZipEntry:
    name: str
    header_at: int
    data_at: int


@dataclass(frozen=True)
class ZipLayout:
    """Where the parts of a zip written without a comment are (as java.util.zip writes them)."""

    entries: tuple[ZipEntry, ...]
    central_directory_at: int
    footer_at: int

    @staticmethod
    def of(data: bytes) -> ZipLayout:
        footer_at = len(data) - 22
        assert data[footer_at : footer_at + 4] == b"PK\x05\x06", "no zip end record where expected"
        count = struct.unpack_from("<H", data, footer_at + 10)[0]
        cd_at = struct.unpack_from("<I", data, footer_at + 16)[0]
        at, entries = cd_at, []
        for _ in range(count):
            assert data[at : at + 4] == b"PK\x01\x02", f"no central directory header at {at}"
            name_len, extra, comment = struct.unpack_from("<HHH", data, at + 28)
            header = struct.unpack_from("<I", data, at + 42)[0]
            name = data[at + 46 : at + 46 + name_len].decode()
            at += 46 + name_len + extra + comment
            local_name, local_extra = struct.unpack_from("<HH", data, header + 26)
            entries.append(ZipEntry(name, header, header + 30 + local_name + local_extra))
        return ZipLayout(tuple(sorted(entries, key=lambda e: e.header_at)), cd_at, footer_at)

    def entry(self, pick: Callable[[str], bool]) -> ZipEntry:
        found = [e for e in self.entries if pick(e.name)]
        assert found, f"no such entry in {[e.name for e in self.entries]}"
        return found[0]


def _flip(at: Callable[[bytes], int]) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        i = at(data)
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]

    return damage


def _zero(at: Callable[[bytes], int], length: int) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        i = at(data)
        return data[:i] + bytes(min(length, len(data) - i)) + data[i + length :]

    return damage


def _cut(to: Callable[[bytes], int]) -> Callable[[bytes], bytes]:
    return lambda data: data[: to(data)]


def _manifest(data: bytes) -> ZipEntry:
    return ZipLayout.of(data).entry(lambda n: n.startswith("MANIFEST-"))


def _index_entry(provider: str) -> Callable[[bytes], ZipEntry]:
    name = "INDEX" if provider == "lineagestore" else "metadata"
    return lambda data: ZipLayout.of(data).entry(lambda n: n == name)


# --------------------------------------------------------------------------------------------- the cases
@dataclass(frozen=True)
class Damage:
    kind: str  # delta, zip, INDEX, SST, no route
    region: str
    # what to damage: a function of the store's files and the provider giving [(file, bytes -> bytes)]
    plan: Callable[[StoreFiles], list[tuple[StateFile, Callable[[bytes], bytes]]]]


def _zip_damage(region: str, how: Callable[[bytes], bytes]) -> Damage:
    return Damage("zip", region, lambda s: [(s.zips[NEWEST_SNAPSHOT], how)])


def _index_damage(region: str, at: Callable[[ZipEntry], int]) -> Damage:
    def plan(s: StoreFiles):
        entry = _index_entry(s.provider)
        return [(s.zips[NEWEST_SNAPSHOT], _flip(lambda d: at(entry(d))))]

    return Damage("INDEX", region, plan)


def _delta_damage(region: str, how: Callable[[bytes], bytes]) -> Damage:
    return Damage("delta", region, lambda s: [(s.deltas[HEAD], how)])


def _sst_damage(region: str, how: Callable[[bytes], bytes]) -> Damage:
    return Damage("SST", region, lambda s: [(s.ssts[s.own_sst(NEWEST_SNAPSHOT)], how)])


def _no_route(s: StoreFiles):
    entry = _index_entry(s.provider)
    return [
        (s.zips[NEWEST_SNAPSHOT], _flip(lambda d: entry(d).data_at + 20)),
        (s.deltas[NEWEST_SNAPSHOT - 1], _flip(lambda d: len(d) // 2)),
    ]


DAMAGES: tuple[Damage, ...] = (
    _delta_damage("header", _flip(lambda d: 12)),
    _delta_damage("records", _flip(lambda d: len(d) // 2)),
    _delta_damage("footer", _flip(lambda d: len(d) - 2)),
    _delta_damage("cut in half", _cut(lambda d: len(d) // 2)),
    _zip_damage("local header (MANIFEST's compression method)", _flip(lambda d: _manifest(d).header_at + 8)),
    _zip_damage("entry name (MANIFEST's)", _flip(lambda d: _manifest(d).header_at + 31)),
    _zip_damage("records (MANIFEST's bytes)", _flip(lambda d: _manifest(d).data_at + 4)),
    _zip_damage("central directory", _flip(lambda d: ZipLayout.of(d).central_directory_at + 10)),
    _zip_damage("footer (end record)", _flip(lambda d: ZipLayout.of(d).footer_at + 10)),
    _zip_damage("cut inside the MANIFEST", _cut(lambda d: _manifest(d).data_at + 10)),
    _zip_damage("64 bytes zeroed (the MANIFEST's entry)", _zero(lambda d: _manifest(d).header_at, 64)),
    _index_damage("local header (name length)", lambda e: e.header_at + 26),
    _index_damage("local header (extra length)", lambda e: e.header_at + 28),
    _index_damage("entry name", lambda e: e.header_at + 31),
    _index_damage("records", lambda e: e.data_at + 20),
    _sst_damage("records (first data block)", _flip(lambda d: 64)),
    _sst_damage("footer", _flip(lambda d: len(d) - 20)),
    _sst_damage("cut short by 100 bytes", _cut(lambda d: len(d) - 100)),
    Damage("no route", f"INDEX records + the delta of version {NEWEST_SNAPSHOT - 1}", _no_route),
)


@dataclass(frozen=True)
class Case:
    provider: str
    filesystem: str
    damage: Damage

    @property
    def id(self) -> str:
        return f"{self.provider}|{self.filesystem}|{self.damage.kind}|{self.damage.region}"


def all_cases() -> list[Case]:
    return [Case(p, fs, d) for p in PROVIDERS for fs in FILESYSTEMS for d in DAMAGES]


def _pick(kind: str, region: str) -> Damage:
    return next(d for d in DAMAGES if d.kind == kind and d.region.startswith(region))


# The README's test command runs these: each kind of file once, every filesystem, one shared baseline per
# filesystem (lineagestore only: Spark's provider is measured by the full matrix, it is not under test).
SAMPLE: tuple[Case, ...] = (
    Case("lineagestore", LOCAL_CRC_KEPT, _pick("delta", "records")),
    Case("lineagestore", LOCAL_CRC_KEPT, _pick("SST", "cut")),
    Case("lineagestore", LOCAL_CRC_DROPPED, _pick("INDEX", "entry name")),
    Case("lineagestore", S3A, _pick("zip", "local header")),
    Case("lineagestore", S3A, _pick("no route", "INDEX")),
)


# ------------------------------------------------------------------------------------------------ routes
def has_route(store: StoreFiles, damaged: set[str]) -> bool:
    """Whether a cold load of ``HEAD`` can avoid every damaged file (names): an undamaged snapshot ``s``
    (none of its zip and SSTs damaged), or the empty state, and undamaged deltas ``s+1..HEAD``."""
    missing = [v for v in range(1, HEAD + 1) if v not in store.deltas]
    assert not missing, f"deltas of versions {missing} are not in the baseline"
    bases = [0] + [
        v
        for v in store.zips
        if v <= HEAD and store.zips[v].name not in damaged and not (store.zip_ssts(v) & damaged)
    ]
    return any(all(store.deltas[v].name not in damaged for v in range(s + 1, HEAD + 1)) for s in bases)


# ---------------------------------------------------------------------------------------------- outcomes
ROUTED, NAMED, RAW, WRONG = "routed around", "failed named", "failed raw", "wrong results"
OUTCOMES = (ROUTED, NAMED, RAW, WRONG)
_LINEAGE_ERRORS = (
    "io.lineagestore.store.NoRouteException:",
    "io.lineagestore.format.CorruptCheckpointFileException:",
)
# Spark's error classes that say nothing of a file: the query's and foreachBatch's wrappers, and the
# "UNCATEGORIZED" load failure whose cause is whatever the provider threw.
_SPARK_WRAPPERS = ("STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR")
_TASK_FAILURE = re.compile(r"Lost task .*?\): ([A-Za-z0-9_.$]+)")


def named_line(provider: str, error: str, damaged: list[str]) -> str | None:
    """The provider's own damage error in ``error`` naming every damaged file, from its class on, if any:
    lineagestore's ``NoRouteException`` / ``CorruptCheckpointFileException``; for Spark an error class of its
    own (``[CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED] ... File: <path>`` and the like; not a wrapper)."""
    for line in error.splitlines():
        if not all(name in line for name in damaged):
            continue
        if provider == "lineagestore":
            own = [line.find(e) for e in _LINEAGE_ERRORS if e in line]
        else:
            own = [
                line.find(f"[{c}]")
                for c in re.findall(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", line)
                if c not in _SPARK_WRAPPERS and not c.endswith("UNCATEGORIZED")
            ]
        if own:
            return line[min(own) :].strip()
    return None


def classify(provider: str, error: str | None, exact: bool, damaged: list[str]) -> str:
    """The outcome of a resumed run: exact results (however the provider got them: a detour, or damage in
    bytes it never reads), its own error naming every damaged file, any other error (a Hadoop, zip, lz4 or
    RocksDB exception, even one naming the file, or an error naming only some of the files), or results
    that differ from the oracle. For lineagestore the failed task's own exception must be that error (a
    raw exception with lineagestore's message somewhere below it is raw)."""
    if error is None:
        return ROUTED if exact else WRONG
    if named_line(provider, error, damaged) is None:
        return RAW
    if provider == "lineagestore":
        task = _TASK_FAILURE.search(error)
        if task and not any(e.startswith(task.group(1) + ":") for e in _LINEAGE_ERRORS):
            return RAW
    return NAMED


def summary_line(provider: str, error: str | None, damaged: list[str]) -> str:
    """What the per-case list shows of a failure: the named error's line, else the deepest JVM cause."""
    if not error:
        return ""
    line = named_line(provider, error, damaged)
    if line is None:
        causes = [
            ln.strip()
            for ln in error.splitlines()
            if ln.strip().startswith("Caused by:") and "py4j" not in ln and "Python Proxy" not in ln
        ]
        line = causes[-1] if causes else error.splitlines()[0]
    return line[:400]


def report_table(results: list[dict[str, Any]]) -> str:
    """The table of docs/reliability.md: per provider and filesystem, how many cases ended how."""
    lines = [
        "| provider | filesystem | cases tried | " + " | ".join(OUTCOMES) + " |",
        "|---|---|---|" + "---|" * len(OUTCOMES),
    ]
    for provider in PROVIDERS:
        for fs in FILESYSTEMS:
            rows = [r for r in results if r["provider"] == provider and r["filesystem"] == fs]
            if rows:
                counts = [sum(r["outcome"] == o for r in rows) for o in OUTCOMES]
                lines.append(f"| {provider} | {fs} | {len(rows)} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines)


def write_report(results: list[dict[str, Any]], path: Path) -> None:
    out = [
        report_table(results),
        "",
        "| case | outcome | detours | the error (the named line, else the deepest cause) |",
        "|---|---|---|---|",
    ]
    for r in results:
        cause = summary_line(r["provider"], r["error"], r["damaged"]).replace("|", "\\|")
        out.append(f"| {r['id']} | {r['outcome']} | {r.get('detours', '')} | {cause} |")
    path.write_text("\n".join(out) + "\n")
    (path.with_suffix(".json")).write_text(json.dumps(results, indent=1))
