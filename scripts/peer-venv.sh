#!/usr/bin/env bash
# The peer libraries we measure and check against, each in a venv of its own (they share
# import names with our packages, so never in ours). Prints the venv's python.
#
#   scripts/peer-venv.sh mq-bridge-py      # mq-bridge-py 0.3.2: the seed's package (compat suite)
#   scripts/peer-venv.sh mq-bridge         # mq-bridge 1.2.0: the Rust-core successor (benchmarks)
#   scripts/peer-venv.sh twainmq           # twainmq 0.2.3: the engine's peer (benchmarks)
#   scripts/peer-venv.sh faststream        # FastStream 0.7.8 with its broker extras
#   scripts/peer-venv.sh fastapi           # FastAPI + uvicorn[standard] + granian (http bench)
#
# Venvs live in $TWAINMQ_PEERS_DIR (default: .peers/ in the repository). A venv is made once
# and reused while its stamp matches the pinned requirement below. Versions are pinned:
# a peer that changes under us would change what "compatible" means.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
peers="${TWAINMQ_PEERS_DIR:-$root/.peers}"

requirement() {
  case "$1" in
    mq-bridge-py) echo "mq-bridge-py==0.3.2" ;;
    mq-bridge) echo "mq-bridge==1.2.0" ;;
    twainmq) echo "twainmq==0.2.3" ;;
    faststream) echo "faststream[nats,rabbit,kafka,redis,mqtt]==0.7.8" ;;
    fastapi) echo "fastapi==0.163.2 uvicorn[standard]==0.54.0 granian==2.8.7" ;;
    *) return 1 ;;
  esac
}

if [ $# -ne 1 ] || ! spec="$(requirement "$1")"; then
  echo "usage: scripts/peer-venv.sh mq-bridge-py|mq-bridge|twainmq|faststream|fastapi" >&2
  exit 2
fi

venv="$peers/$1"
stamp="$venv/.requirement"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$spec" ]; then
  rm -rf "$venv"
  mkdir -p "$peers"
  python3 -m venv "$venv" >&2
  read -ra packages <<< "$spec"  # a peer may be several packages, space-separated
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" >&2
  echo "$spec" > "$stamp"
fi
echo "$venv/bin/python"
