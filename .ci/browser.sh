#!/usr/bin/env bash
# The browser the viewer's tests drive: Debian's chromium and its driver, headless. Installed once;
# a machine that has both is left as it is.
set -euo pipefail

log() { echo "[browser] $*" >&2; }

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    log "chromium and chromedriver are here: $(chromium --version 2>/dev/null || echo 'version unknown')"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log "installing chromium and chromium-driver with apt"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium chromium-driver
command -v chromium >/dev/null && command -v chromedriver >/dev/null || { log "chromium or chromedriver is still missing"; exit 1; }
