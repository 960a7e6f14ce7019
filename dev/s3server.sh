#!/usr/bin/env bash
# Builds (once) and caches the MinIO server the integration tests start as a local process, and prints the
# path of the binary. Idempotent: a second call only prints the path.
#
#   dev/s3server.sh            # -> ~/.cache/lineagestore/minio/RELEASE.2025-09-07T16-13-09Z/minio
#
# MinIO comes from the Go module proxy with `go install` (no Docker, no binary download): the release
# below is resolved by the proxy to a pseudo-version, and its go.mod has no replace directives, which
# `go install module@version` requires. A cold build (empty Go module and build caches) takes a few
# minutes on 2 cores; see docs/testing.md. Needs Go >= 1.24 (MinIO's go.mod); an older `go` fetches a newer
# toolchain from the module proxy by itself (GOTOOLCHAIN=auto).
#
# Environment: LINEAGESTORE_CACHE (default ~/.cache/lineagestore), MINIO_RELEASE / MINIO_MODULE_VERSION /
# MINIO_COMMIT to build another release, GO (default `go`). Go's own caches (GOMODCACHE, GOCACHE) are used
# as configured; the binary is the only thing kept under LINEAGESTORE_CACHE.
set -euo pipefail

# RELEASE.2025-09-07T16-13-09Z is the newest MinIO release the Go module proxy serves here
# (RELEASE.2025-10-15T17-29-55Z is refused by the proxy with 403 "not available").
MINIO_RELEASE="${MINIO_RELEASE:-RELEASE.2025-09-07T16-13-09Z}"
MINIO_MODULE_VERSION="${MINIO_MODULE_VERSION:-v0.0.0-20250907161309-07c3a429bfed}"
MINIO_COMMIT="${MINIO_COMMIT:-07c3a429bfed433e49018cb0f78a52145d4bedeb}"
GO="${GO:-go}"

cache="${LINEAGESTORE_CACHE:-${HOME}/.cache/lineagestore}"
dir="${cache}/minio/${MINIO_RELEASE}"
bin="${dir}/minio"

if [[ -x "${bin}" ]] && "${bin}" --version >/dev/null 2>&1; then
  printf '%s\n' "${bin}"
  exit 0
fi

command -v "${GO}" >/dev/null 2>&1 || {
  echo "dev/s3server.sh: Go is required to build MinIO (${GO} not found on PATH)" >&2
  exit 1
}

mkdir -p "${dir}"
# Build into a private directory, then rename: a concurrent or interrupted build never leaves a
# half-written binary at ${bin}.
tmp="$(mktemp -d "${dir}/.build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

# The version variables MinIO's own build sets (buildscripts/gen-ldflags.go), so `minio --version` and the
# server's logs name the release instead of DEVELOPMENT.
rel_time="${MINIO_RELEASE#RELEASE.}"                      # 2025-09-07T16-13-09Z
rel_time="${rel_time:0:13}:${rel_time:14:2}:${rel_time:17}" # 2025-09-07T16:13:09Z
pkg=github.com/minio/minio/cmd
ldflags="-s -w -X ${pkg}.Version=${rel_time} -X ${pkg}.ReleaseTag=${MINIO_RELEASE}"
ldflags+=" -X ${pkg}.CommitID=${MINIO_COMMIT} -X ${pkg}.ShortCommitID=${MINIO_COMMIT:0:12}"
ldflags+=" -X ${pkg}.CopyrightYear=${rel_time:0:4}"

echo "dev/s3server.sh: building MinIO ${MINIO_RELEASE} (${MINIO_MODULE_VERSION}) with $("${GO}" version)" >&2
echo "dev/s3server.sh: the first build downloads and compiles MinIO: a few minutes" >&2
start=${SECONDS}
GOBIN="${tmp}" CGO_ENABLED=0 \
  "${GO}" install -trimpath -ldflags "${ldflags}" "github.com/minio/minio@${MINIO_MODULE_VERSION}" >&2
"${tmp}/minio" --version >/dev/null
mv -f "${tmp}/minio" "${bin}"
echo "dev/s3server.sh: built in $((SECONDS - start))s" >&2
printf '%s\n' "${bin}"
