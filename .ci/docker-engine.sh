#!/usr/bin/env bash
# Make a Docker engine answer on this machine, or fail loudly.
#
# Idempotent: installs docker.io, debootstrap and runsc (gVisor) only when missing,
# starts dockerd only when `docker info` fails, and reuses a daemon that already
# answers. A runsc that cannot be installed is logged, not fatal: the engine still
# starts, and codeward's gVisor tests fail saying why. The storage driver is the
# first that starts here (overlay2, then vfs); the daemon's own log is printed when
# it does not come up, so CI shows why.
#
# gVisor is registered as the runtime "runsc" in /etc/docker/daemon.json, merged
# into what is there. Its flags: --network=none (this runsc refuses Docker's own
# `--network none` otherwise; codeward's sandboxes have no network anyway) and
# --host-uds=all: the sandbox's kernel creates its ipc sockets on the host folder, and
# a sandbox with an egress list opens the host socket of its proxy. A daemon that already runs reloads the
# runtimes on SIGHUP, so registering never restarts it or its containers.
set -euo pipefail

LOG_DIR="${CODEWARD_DOCKER_LOG_DIR:-/var/log/codeward}"
LOG="$LOG_DIR/dockerd.log"
WAIT_SECONDS="${CODEWARD_DOCKER_WAIT_SECONDS:-60}"
DAEMON_JSON=/etc/docker/daemon.json
RUNSC_ARGS='["--network=none", "--host-uds=all"]'

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

gvisor_installed() { command -v runsc >/dev/null 2>&1; }

install_gvisor() {
    gvisor_installed && return 0
    log "installing runsc (gVisor)"
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runsc)
    as_root "${install[@]}" >/dev/null 2>&1 \
        || { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq && as_root "${install[@]}" >/dev/null; } \
        || log "runsc could not be installed: the engine will have no gVisor runtime"
}

# The runtimes dockerd knows, as JSON ("" when it does not answer).
engine_runtimes() { docker info --format '{{json .Runtimes}}' 2>/dev/null || true; }

# Whether the running engine has runsc with exactly our flags.
runsc_registered() {
    engine_runtimes | RUNSC_ARGS="$RUNSC_ARGS" python3 -c '
import json, os, sys
runtimes = json.loads(sys.stdin.read() or "{}")
wanted = json.loads(os.environ["RUNSC_ARGS"])
sys.exit(0 if runtimes.get("runsc", {}).get("runtimeArgs") == wanted else 1)'
}

# Add (or correct) the runsc entry in daemon.json, keeping every other setting there.
register_runsc() {
    gvisor_installed || return 0
    as_root mkdir -p "$(dirname "$DAEMON_JSON")"
    as_root env RUNSC_PATH="$(command -v runsc)" RUNSC_ARGS="$RUNSC_ARGS" DAEMON_JSON="$DAEMON_JSON" python3 -c '
import json, os, pathlib
path = pathlib.Path(os.environ["DAEMON_JSON"])
config = json.loads(path.read_text() or "{}") if path.exists() else {}
config.setdefault("runtimes", {})["runsc"] = {
    "path": os.environ["RUNSC_PATH"], "runtimeArgs": json.loads(os.environ["RUNSC_ARGS"])}
path.write_text(json.dumps(config, indent=2) + "\n")'
}

# Make a running engine know runsc: a SIGHUP reloads runtimes without touching containers.
reload_runtimes() {
    gvisor_installed || return 0
    runsc_registered && return 0
    log "registering runsc (gVisor) with the running engine"
    register_runsc
    as_root kill -HUP "$(pgrep -xo dockerd)"
    local deadline=$((SECONDS + WAIT_SECONDS))
    while [ "$SECONDS" -lt "$deadline" ]; do runsc_registered && return 0; sleep 0.5; done
    log "dockerd did not take runsc from $DAEMON_JSON; log tail:"
    tail -n 20 "$LOG" >&2 || true
    return 1
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

# Stale pid files from daemons that died keep new ones from starting. containerd's is
# stale too when its pid now belongs to another process (a machine restored from a
# snapshot): dockerd then waits on a containerd that is not there, and gives up.
clear_stale_pidfile() {
    local pidfile=/var/run/docker.pid
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        as_root rm -f "$pidfile"
    fi
    local containerd=/var/run/docker/containerd/containerd.pid
    if [ -f "$containerd" ] && [ "$(cat "/proc/$(cat "$containerd")/comm" 2>/dev/null)" != containerd ]; then
        as_root rm -f "$containerd"
    fi
}

main() {
    install_missing
    install_gvisor
    if engine_answers; then
        reload_runtimes
        log "engine already running: $(docker info --format '{{.ServerVersion}} {{.Driver}}') $(engine_runtimes)"
        return 0
    fi
    register_runsc
    if pgrep -x dockerd >/dev/null; then
        log "a dockerd runs but does not answer; waiting for it"
        local deadline=$((SECONDS + WAIT_SECONDS))
        while [ "$SECONDS" -lt "$deadline" ]; do
            if engine_answers; then reload_runtimes; return; fi
            sleep 0.5
        done
        log "the running dockerd never answered; log tail:"
        tail -n 40 "$LOG" >&2 || true
        return 1
    fi
    clear_stale_pidfile
    # overlay2 twice before vfs: vfs copies the whole image for each container (about 30 s a
    # sandbox start against 0.6 s), so a start that failed for another reason must not pick it.
    for driver in overlay2 overlay2 vfs; do
        if start_with "$driver"; then
            [ "$driver" = vfs ] && log "WARNING: overlay2 did not start; on vfs each sandbox starts in ~30 s"
            log "engine ready: $(docker info --format '{{.ServerVersion}} {{.Driver}}') $(engine_runtimes)"
            return 0
        fi
        clear_stale_pidfile
    done
    log "the Docker engine did not start; dockerd log tail ($LOG):"
    tail -n 40 "$LOG" >&2 || true
    return 1
}

main "$@"
