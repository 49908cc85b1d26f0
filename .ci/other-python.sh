#!/usr/bin/env bash
# A second CPython with numpy, pandas and Pillow, for the codec's cross-interpreter test.
# Prints the interpreter's path; kept in a venv outside the checkout and reused while it works.
set -euo pipefail

VENV="${CODEWARD_OTHER_PYTHON_VENV:-/var/cache/codeward/other-python}"
log() { echo "[other-python] $*" >&2; }

find_python() {
    local root
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for candidate in "$root"/versions/3.12*/bin/python3.12 "$root"/versions/3.13*/bin/python3.13 \
        "$(command -v python3.12 || true)" "$(command -v python3.13 || true)"; do
        [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    return 1
}

if ! "$VENV/bin/python" -c "import numpy, pandas, PIL" >/dev/null 2>&1; then
    base="$(find_python)" || { log "no CPython 3.12 or 3.13 on this machine"; exit 1; }
    log "making $VENV from $base"
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$base" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q numpy pandas pillow >&2
fi
echo "$VENV/bin/python"
