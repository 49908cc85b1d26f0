#!/usr/bin/env bash
# Make a Docker engine answer on this machine, or fail loudly.
#
# Idempotent: installs docker.io and debootstrap only when missing, starts dockerd
# only when `docker info` fails, and reuses a daemon that already answers. The
# storage driver is the first that starts here (overlay2, then vfs); the daemon's
# own log is printed when it does not come up, so CI shows why.
set -euo pipefail

LOG_DIR="${CODEWARD_DOCKER_LOG_DIR:-/var/log/codeward}"
LOG="$LOG_DIR/dockerd.log"
WAIT_SECONDS="${CODEWARD_DOCKER_WAIT_SECONDS:-60}"

log() { echo "[docker-engine] $*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

engine_answers() { docker info >/dev/null 2>&1; }

install_missing() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

# Start dockerd with one storage driver and wait for it; 0 when it answers.
start_with() {
    local driver="$1"; shift
    log "starting dockerd (storage driver $driver) $*"
    as_root mkdir -p "$LOG_DIR"
    # setsid: the daemon outlives this script and the CI step that ran it.
    as_root setsid dockerd --storage-driver "$driver" "$@" >>"$LOG" 2>&1 </dev/null &
    local pid=$!
    local deadline=$((SECONDS + WAIT_SECONDS))
    while [ "$SECONDS" -lt "$deadline" ]; do
        engine_answers && return 0
        if ! kill -0 "$pid" 2>/dev/null && ! pgrep -x dockerd >/dev/null; then
            log "dockerd exited"
            return 1
        fi
        sleep 0.5
    done
    log "dockerd did not answer within ${WAIT_SECONDS}s"
    as_root kill "$pid" 2>/dev/null || true
    return 1
}

# A stale pid file from a daemon that died keeps a new one from starting.
clear_stale_pidfile() {
    local pidfile=/var/run/docker.pid
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        as_root rm -f "$pidfile"
    fi
}

main() {
    install_missing
    if engine_answers; then
        log "engine already running: $(docker info --format '{{.ServerVersion}} {{.Driver}}')"
        return 0
    fi
    if pgrep -x dockerd >/dev/null; then
        log "a dockerd runs but does not answer; waiting for it"
        local deadline=$((SECONDS + WAIT_SECONDS))
        while [ "$SECONDS" -lt "$deadline" ]; do engine_answers && return 0; sleep 0.5; done
        log "the running dockerd never answered; log tail:"
        tail -n 40 "$LOG" >&2 || true
        return 1
    fi
    clear_stale_pidfile
    for driver in overlay2 vfs; do
        if start_with "$driver"; then
            log "engine ready: $(docker info --format '{{.ServerVersion}} {{.Driver}}')"
            return 0
        fi
        clear_stale_pidfile
    done
    log "the Docker engine did not start; dockerd log tail ($LOG):"
    tail -n 40 "$LOG" >&2 || true
    return 1
}

main "$@"
