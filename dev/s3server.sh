#!/usr/bin/env bash
# Fetches and builds (once) what the S3 test server needs, and reports what is in the cache: the installed
# package's `lineagestore-testing prepare-s3`, the one place where the MinIO release, its build steps and the
# s3a jars are pinned (lineagestore.testing.s3_setup; docs/testing.md, "S3"). Arguments pass through:
#
#   dev/s3server.sh            # fetch and build what is missing, then report each item's path, size, version
#   dev/s3server.sh --check    # report only; exit 1 if anything is missing
#
# Sets up .venv first (dev/_setup.sh), as dev/test does.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
ls_setup
exec python -m lineagestore.testing prepare-s3 "$@"
