"""A local checkpoint's files read by Python itself, with the two calls of ``JvmTools`` that
:mod:`.spark_files` reads Spark's logs with (``list`` and ``read_text``), so that a refusal that only needs
Spark's logs (``migrate`` of a checkpoint already on lineagestore) is made before any JVM starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineagestore.checkpoint.model import local_path


class LocalFiles:
    """``list`` and ``read_text`` as ``JvmTools`` has them, on ``file:`` URIs and local paths."""

    @staticmethod
    def _path(uri: str) -> Path:
        path = local_path(uri)
        if path is None:
            raise ValueError(f"{uri} is not a local path")
        return path

    def list(self, uri: str) -> list[dict[str, Any]] | None:
        path = self._path(uri)
        if not path.is_dir():
            return None
        return [
            {
                "name": p.name,
                "dir": p.is_dir(),
                "bytes": p.stat().st_size,
                "modifiedMs": p.stat().st_mtime_ns // 10**6,
            }
            for p in sorted(path.iterdir(), key=lambda p: p.name)
        ]

    def read_text(self, uri: str) -> str | None:
        path = self._path(uri)
        return path.read_text(encoding="utf-8") if path.is_file() else None
