#!/usr/bin/env bash
# Start the real Chroma server locally, from npm alone, as a reference to compare
# umbra's Chroma-compatible HTTP API with (same requests, same client).
#
#   bash test/chroma/chroma-local.sh WORKDIR [PORT]
#
# Installs chromadb@3.5.0 (the JS client, whose `chroma run` starts Chroma's Rust
# server from the platform binding chromadb-js-bindings-linux-x64-gnu@1.3.4) into
# WORKDIR/npm. The binding needs glibc >= 2.38; where the system's is older (Debian
# bookworm has 2.36) the next Debian release's libc6 is downloaded with apt into
# WORKDIR/glibc and used for this one process only (nothing system-wide changes).
# The server listens on 127.0.0.1:PORT (default 8000) with its data in WORKDIR/db,
# reset allowed; its pid is written to WORKDIR/server.pid. It ignores SIGTERM:
# stop it with `kill -9 $(cat WORKDIR/server.pid)`. /openapi.json on it is
# Chroma's own description of the API.
set -euo pipefail
WORK=${1:?usage: chroma-local.sh WORKDIR [PORT]}; PORT=${2:-8000}
mkdir -p "$WORK"/{npm,db}; WORK=$(cd "$WORK" && pwd)
if [[ ! -d $WORK/npm/node_modules/chromadb-js-bindings-linux-x64-gnu ]]; then
  (cd "$WORK/npm" && npm init -y >/dev/null &&
    npm install --no-audit --no-fund chromadb@3.5.0 chromadb-js-bindings-linux-x64-gnu@1.3.4 >/dev/null)
fi
BINDING=$(ls "$WORK"/npm/node_modules/chromadb-js-bindings-linux-x64-gnu/*.node)
LAUNCH=()
if ! node -e "require('$BINDING')" 2>/dev/null; then
  G=$WORK/glibc/usr/lib/x86_64-linux-gnu
  if [[ ! -x $G/ld-linux-x86-64.so.2 ]]; then
    A=$WORK/apt; mkdir -p "$A"/{lists/partial,cache/archives/partial,prefs}
    MIRROR=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
    [[ -n $MIRROR ]] || MIRROR=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main" >"$A/sources.list"
    APTO=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/nonexistent
      -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache"
      -o Dir::Etc::Preferences=/nonexistent -o Dir::Etc::PreferencesParts="$A/prefs" -o Debug::NoLocking=1)
    apt-get "${APTO[@]}" update >/dev/null
    (cd "$A" && apt-get "${APTO[@]}" download libc6 >/dev/null 2>&1)
    dpkg-deb -x "$A"/libc6_*.deb "$WORK/glibc"
  fi
  LAUNCH=("$G/ld-linux-x86-64.so.2" --library-path "$G:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu")
fi
cat >"$WORK/chroma.yaml" <<YAML
persist_path: "$WORK/db"
listen_address: "127.0.0.1"
port: $PORT
allow_reset: true
YAML
(cd "$WORK" && exec "${LAUNCH[@]}" "$(command -v node)" "$WORK/npm/node_modules/chromadb/dist/cli.mjs" run "$WORK/chroma.yaml") \
  >"$WORK/server.log" 2>&1 &
echo $! >"$WORK/server.pid"
for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:$PORT/api/v2/heartbeat" >/dev/null && break; sleep 1; done
curl -sf "http://127.0.0.1:$PORT/api/v2/heartbeat" >/dev/null || { tail -20 "$WORK/server.log"; exit 1; }
echo "chroma on http://127.0.0.1:$PORT (pid $(cat "$WORK/server.pid"), API $(curl -s "http://127.0.0.1:$PORT/api/v2/version"))"
