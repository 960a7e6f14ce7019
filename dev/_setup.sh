# Shared set-up for dev/test and dev/demo (sourced, not run). Idempotent and fast when already done:
#  - creates .venv with python3.11 (or $PYTHON) when missing or broken;
#  - (re)installs the project editable with its test extra when pyproject.toml, VERSION or the build
#    backend changed since the last install (hash stamp in .venv/);
#  - makes sure the bundled lineagestore-spark jar matches the current Scala sources (dev/jarbuild.py
#    runs dev/sbt spark/package only when the jar is missing or stale);
#  - puts .venv/bin first on PATH.
# `ls_rocksdb_native DIR` (dev/test) gives every JVM a run starts RocksDB's native library from DIR.
# Honours CI=true: no colour, no prompts, no progress bars.

LS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${LS_ROOT}"

if [[ "${CI:-}" == "true" ]]; then
  export NO_COLOR=1 PY_COLORS=0 TERM=dumb PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
fi

LS_PYTHON="${PYTHON:-python3.11}"
LS_VENV="${LS_ROOT}/.venv"
LS_STAMP="${LS_VENV}/.lineagestore-install-stamp"

ls_log() { printf '==> %s\n' "$*"; }

ls_setup() {
  command -v java >/dev/null 2>&1 || { echo "Java 17 is required (java not found on PATH)" >&2; return 1; }
  command -v "${LS_PYTHON}" >/dev/null 2>&1 || { echo "Python 3.11 is required (${LS_PYTHON} not found)" >&2; return 1; }

  if [[ ! -x "${LS_VENV}/bin/python" ]] || ! "${LS_VENV}/bin/python" -c 'import sys' >/dev/null 2>&1; then
    ls_log "creating ${LS_VENV}"
    rm -rf "${LS_VENV}"
    "${LS_PYTHON}" -m venv "${LS_VENV}" || return 1
  fi

  local want
  want="$(cat pyproject.toml VERSION dev/jar_backend.py dev/jarbuild.py | sha256sum | cut -d' ' -f1)"
  if [[ ! -f "${LS_STAMP}" || "$(cat "${LS_STAMP}")" != "${want}" ]]; then
    ls_log "installing lineagestore (editable, with test extra) into ${LS_VENV}"
    ls_log "(the first time this fetches sbt, the Spark 4.3.0 jars and the Python dependencies: a few minutes)"
    rm -f "${LS_STAMP}"
    "${LS_VENV}/bin/python" -m pip install -q --upgrade pip || return 1
    "${LS_VENV}/bin/python" -m pip install -q -e ".[test]" || return 1
    printf '%s\n' "${want}" >"${LS_STAMP}"
  fi

  # Editable install: the package reads python/lineagestore/jars/ directly, so keep that jar current.
  "${LS_VENV}/bin/python" dev/jarbuild.py >/dev/null || return 1

  export PATH="${LS_VENV}/bin:${PATH}"
  export VIRTUAL_ENV="${LS_VENV}"
}

# RocksJava loads its native library from java.library.path when it is there, and otherwise extracts it from
# its jar into java.io.tmpdir (14 MiB) at every JVM start, deleted at a normal exit only: the JVMs the suites
# kill or halt (executors, crash points) left about 30 copies in /tmp per run. This extracts, once, the
# library of the rocksdbjni jar the suites run with, under the name RocksJava looks for on this platform, into
# DIR, and puts DIR on LD_LIBRARY_PATH, which is on java.library.path on Linux and passes to the JVMs those
# JVMs start. Where the platform is not one it knows, or Spark's rocksdbjni is not the version build.sbt
# compiles against (the sbt suites would load it too), it does nothing and RocksJava extracts as before.
ls_rocksdb_native() {
  local dir="$1" lib
  lib="$("${LS_VENV}/bin/python" - "${dir}" <<'PY'
import os, platform, re, sys, zipfile

import pyspark

names = {"x86_64": "librocksdbjni-linux64.so", "aarch64": "librocksdbjni-linux-aarch64.so"}
name = names.get(platform.machine())
if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or name is None:
    sys.exit(0)
wanted = re.search(r'val rocksdbVersion = "([^"]+)"', open("build.sbt").read())
if wanted is None:
    sys.exit(0)
jar = os.path.join(os.path.dirname(pyspark.__file__), "jars", f"rocksdbjni-{wanted.group(1)}.jar")
if not os.path.isfile(jar):
    sys.exit(0)
os.makedirs(sys.argv[1], exist_ok=True)
with zipfile.ZipFile(jar) as z:
    z.extract(name, sys.argv[1])
print(os.path.join(sys.argv[1], name))
PY
)" || return 0
  if [[ -n "${lib}" ]]; then
    export LD_LIBRARY_PATH="${dir}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
    ls_log "RocksDB's native library for this run: ${lib}"
  fi
}
