"""``lineagestore-testing prepare-s3``: fetch and build ahead of time what the S3 test fixtures need.

    lineagestore-testing prepare-s3           # fetch and build what is missing, then report what is there
    lineagestore-testing prepare-s3 --check   # report only, fetch and build nothing
    python -m lineagestore.testing prepare-s3 # the same command

The fixtures ``s3_server``, ``s3_bucket``, ``s3_stream`` and ``s3_faults``, ``S3Server`` and
``python -m lineagestore.testing.with_s3`` otherwise do this on first use, in the middle of a test run: the
s3a jars Spark needs (hadoop-aws, the AWS SDK v2 bundle, the analytics accelerator; 690 MB from Maven
Central) and the MinIO server (built from source with Go for the process backend, minutes; pulled as an image
for the docker backend). The report gives each item's path, size and version in ``$LINEAGESTORE_CACHE``
(default ``~/.cache/lineagestore``). Exit status: 0 when everything is there, 1 when something is missing
(``--check``) or cannot be fetched or built (the message says what to install), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lineagestore.testing import s3_setup as setup
from lineagestore.testing.progress import megabytes

READY, MISSING = 0, 1
_LEFTOVER = re.compile(r"^\.(fetch-|build-|build\.)")  # private directories of a fetch/build in progress


@dataclass
class Item:
    """One thing the S3 fixtures need, as found now."""

    what: str
    version: str
    where: str  # a path, or an image name
    present: bool
    size: int | None = None
    needs: str = ""  # how it is obtained, or why it cannot be


# --------------------------------------------------------------------------------------------- finding
def _minio_version(binary: Path) -> str | None:
    """The release ``minio --version`` names, or None when the binary does not run."""
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    found = re.search(r"RELEASE\.\S+", proc.stdout)
    return found[0] if found else proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "unknown"


def minio_item(backend: str) -> Item:
    if backend == "docker":
        proc = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Size}}", setup.MINIO_IMAGE],
            capture_output=True,
            text=True,
        )
        size = int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else None
        return Item(
            "MinIO image", setup.MINIO_RELEASE, setup.MINIO_IMAGE, proc.returncode == 0, size, "docker pull"
        )
    env = os.environ.get("LINEAGESTORE_MINIO")
    path = Path(env) if env else setup.minio_cache_path()
    needs = (
        "LINEAGESTORE_MINIO names no runnable MinIO binary: fix or unset it"
        if env
        else f"built with Go from the Go module proxy: {setup.MINIO_BUILD_COST}"
    )
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Item("MinIO server", setup.MINIO_RELEASE, str(path), False, needs=needs)
    version = _minio_version(path)
    if version is None:
        return Item("MinIO server", setup.MINIO_RELEASE, str(path), False, path.stat().st_size, needs)
    return Item("MinIO server", version, str(path), True, path.stat().st_size)


_JAR_NAMES = {
    "hadoop-aws": "hadoop-aws",
    "bundle": "AWS SDK v2 bundle",
    "analyticsaccelerator-s3": "analytics accel.",
}


def jar_items() -> list[Item]:
    items = []
    for group, artifact, version in setup.S3A_ARTIFACTS:
        path = setup.s3a_jar_path(artifact, version)
        present = path.is_file()
        size = path.stat().st_size if present else None
        needs = (
            f"{group}:{artifact}:{version}, {megabytes(setup.S3A_SIZES.get(artifact, 0))} from Maven Central"
        )
        items.append(Item(_JAR_NAMES.get(artifact, artifact), version, str(path), present, size, needs))
    return items


def boto3_item() -> Item:
    """S3Server checks its server with boto3 (the ``testing`` extra); prepare cannot install it."""
    present = importlib.util.find_spec("boto3") is not None
    version = importlib.metadata.version("boto3") if present else "-"
    where = "Python package" if present else "not installed"
    needs = "pip install 'lineagestore[testing]'"
    return Item("boto3", version, where, present, needs=needs)


def leftovers() -> list[Path]:
    """Private directories an interrupted fetch or build left (a running one has one too)."""
    dirs = [setup.minio_cache_path().parent, setup.s3a_dir()]
    return sorted(
        p for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir() and _LEFTOVER.match(p.name)
    )


# ------------------------------------------------------------------------------------------- preparing
def _obstacle(minio: Item, backend: str) -> str | None:
    """Why a missing MinIO cannot be obtained here, before anything is fetched; None if it can."""
    if minio.present:
        return None
    if backend == "docker":
        return None
    if os.environ.get("LINEAGESTORE_MINIO"):
        return f"LINEAGESTORE_MINIO={minio.where} is not a MinIO binary that runs: fix or unset it"
    try:
        setup.find_go()
    except setup.S3ServerError as exc:
        return str(exc)
    return None


def _obtain_minio(minio: Item, backend: str) -> None:
    if backend == "docker":
        proc = subprocess.run(["docker", "pull", setup.MINIO_IMAGE], stdout=sys.stderr)
        if proc.returncode != 0:
            raise setup.S3ServerError(f"docker pull {setup.MINIO_IMAGE} failed (exit {proc.returncode})")
    else:
        setup.build_minio(hint_ahead=False)


def _report(items: list[Item], backend: str) -> None:
    chosen = os.environ.get("LINEAGESTORE_S3_BACKEND") or "auto"
    print(
        f"S3 test fixtures: backend {backend} (LINEAGESTORE_S3_BACKEND={chosen}), cache {setup.cache_dir()}"
    )
    for it in items:
        status = "ok" if it.present else "missing"
        size = megabytes(it.size) if it.size is not None else "-"
        line = f"  {status:<8} {it.what:<18} {it.version:<29} {size:>9}  {it.where}"
        if not it.present and it.needs:
            line += f"  ({it.needs})"
        print(line)
    for path in leftovers():
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(
            f"  leftover {path} ({megabytes(size)}): of an interrupted fetch or build (or one running now); "
            "safe to delete when no test run is fetching"
        )


def prepare_s3(check: bool = False) -> int:
    backend = setup.choose_backend()
    items = [minio_item(backend), *jar_items(), boto3_item()]
    missing = [it for it in items if not it.present]
    if missing and not check:
        obstacle = _obstacle(items[0], backend)
        if not items[-1].present:
            obstacle = f"boto3 is not installed: {items[-1].needs}" + (
                f"; and {obstacle}" if obstacle else ""
            )
        if obstacle:
            _report(items, backend)
            print(f"cannot prepare the S3 fixtures, nothing was fetched: {obstacle}", file=sys.stderr)
            return MISSING
        try:
            if not items[0].present:
                _obtain_minio(items[0], backend)
            if not all(it.present for it in items[1:-1]):
                setup.s3a_jars(hint_ahead=False)
        except setup.S3ServerError as exc:
            _report([minio_item(backend), *jar_items(), boto3_item()], backend)
            print(f"cannot prepare the S3 fixtures: {exc}", file=sys.stderr)
            return MISSING
        items = [minio_item(backend), *jar_items(), boto3_item()]
        missing = [it for it in items if not it.present]
    _report(items, backend)
    total = sum(it.size or 0 for it in items if it.present)
    if missing:
        names = ", ".join(it.what for it in missing)
        print(
            f"not ready: {len(missing)} of {len(items)} missing ({names}); run {setup.PREPARE_HINT} to fetch "
            "and build them",
            file=sys.stderr,
        )
        return MISSING
    print(
        f"ready: all {len(items)} present ({megabytes(total)}); the S3 fixtures start without fetching or building"
    )
    return READY


# ---------------------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lineagestore-testing", description="Set-up commands for lineagestore's test helpers."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    prepare = commands.add_parser(
        "prepare-s3",
        help="fetch and build what the S3 test fixtures need, and report it",
        description=(
            "Fetch and build ahead of time what the S3 test fixtures need (the s3a jars; MinIO, built with "
            "Go or pulled with Docker), then report each item's path, size and version. Exit status: 0 "
            "when everything is there, 1 when something is missing or cannot be obtained, 2 usage."
        ),
        epilog=(
            "examples:\n"
            "  lineagestore-testing prepare-s3           # before the first test run, or in CI's set-up\n"
            "  lineagestore-testing prepare-s3 --check   # is everything there? (fetches nothing)\n"
            "  LINEAGESTORE_CACHE=/ci/cache lineagestore-testing prepare-s3"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument(
        "--check",
        action="store_true",
        help="report only: fetch and build nothing; exit 1 if anything is missing",
    )
    args = parser.parse_args(argv)
    try:
        return prepare_s3(check=args.check)
    except KeyboardInterrupt:
        print(
            "interrupted: nothing partial was kept (Go's module cache keeps what was downloaded)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
