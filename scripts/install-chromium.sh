#!/usr/bin/env bash
# The console's browser test (tests/acceptance/test_policy_impact.py) drives Debian's
# Chromium with Playwright: install it when it is missing. Playwright's own browser
# download (`playwright install`) is never used.
set -euo pipefail
test -x /usr/bin/chromium && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium: /usr/bin/chromium is missing (the console's browser test will be" \
    "skipped); run: sudo apt-get install -y chromium" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q chromium >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
test -x /usr/bin/chromium
