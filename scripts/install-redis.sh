#!/usr/bin/env bash
# Tests talk to a real Redis: install Debian's redis-server when it is missing.
# The tests start and stop their own instance on a free loopback port.
set -euo pipefail
command -v redis-server >/dev/null && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-redis: redis-server is missing; run: sudo apt-get install -y redis-server" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q redis-server >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q redis-server >/dev/null; }
# Debian's package may start a system instance; the tests use their own.
command -v redis-server >/dev/null
