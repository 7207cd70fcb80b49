#!/usr/bin/env bash
# Installs Debian's headless Chromium and its WebDriver for the console's browser tests
# (tests/console/). Idempotent: does nothing when both are already on PATH. Needs root
# (CI runs as root); prints where the browser and driver are.
set -euo pipefail

have_browser() {
    command -v chromedriver >/dev/null 2>&1 &&
        { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
}

if ! have_browser; then
    export DEBIAN_FRONTEND=noninteractive
    sudo_prefix=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo_prefix=(sudo)
    fi
    "${sudo_prefix[@]}" apt-get update -qq
    "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver fonts-dejavu-core >/dev/null
fi

have_browser || { echo "install-browser: chromium/chromedriver still missing" >&2; exit 1; }
echo "install-browser: $(command -v chromium || command -v chromium-browser)," \
    "$(command -v chromedriver)"
