"""In-tree PEP 517 backend: setuptools.build_meta, plus the lineagestore-spark jar as package data.

Before a wheel or an editable install is built, the jar for the current VERSION is built with
``dev/sbt spark/package`` when missing or stale and copied to python/lineagestore/jars/, so
``pip install .`` alone gives a working install.
"""

from __future__ import annotations

import sys

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (re-export the rest of the backend unchanged)

import jarbuild


def _ensure_jar() -> None:
    jarbuild.ensure_jar(log=lambda m: print(m, file=sys.stderr))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _ensure_jar()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _ensure_jar()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
