#!/usr/bin/env bash
# Make a minimal Debian image with Python 3 from Debian's own packages, for
# machines that reach a Debian mirror but no container registry.
#
#   debian-base.sh TAG LABEL [SUITE] [MIRROR]
#
# TAG is the image name to create; LABEL is stored as codeward.base=LABEL so the
# image is found again instead of being rebuilt. SUITE defaults to this machine's
# Debian release and MIRROR to its configured Debian mirror. Downloaded packages
# are kept in $CODEWARD_CACHE_DIR/debootstrap (default ~/.cache/codeward) so a
# second run downloads nothing. Needs root (debootstrap) and the docker CLI.
set -euo pipefail

TAG="${1:?usage: debian-base.sh TAG LABEL [SUITE] [MIRROR]}"
LABEL="${2:?usage: debian-base.sh TAG LABEL [SUITE] [MIRROR]}"
SUITE="${3:-}"
MIRROR="${4:-}"
CACHE_DIR="${CODEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/codeward}/debootstrap"

log() { echo "[debian-base] $*" >&2; }

host_suite() {
    . /etc/os-release
    echo "${VERSION_CODENAME:?this machine does not name its Debian release; pass SUITE}"
}

# The first Debian (not security, not third-party) mirror apt is configured with.
host_mirror() {
    local uri
    uri=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
             grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } |
           grep -E '/debian/?$' | head -n 1 || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

[ -n "$SUITE" ] || SUITE=$(host_suite)
[ -n "$MIRROR" ] || MIRROR=$(host_mirror)
command -v debootstrap >/dev/null || { log "debootstrap is not installed: apt-get install -y debootstrap"; exit 1; }

ROOT=$(mktemp -d "${TMPDIR:-/tmp}/codeward-rootfs.XXXXXX")
# mktemp makes the folder 0700, and the tar's "." entry gives the image's / that mode: with
# the vfs storage driver a non-root user then cannot reach anything in the sandbox.
chmod 755 "$ROOT"
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$CACHE_DIR"

log "debootstrap $SUITE from $MIRROR"
debootstrap --variant=minbase --include=python3 --cache-dir="$CACHE_DIR" \
    "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || { tail -n 30 "$ROOT.log" >&2; rm -f "$ROOT.log"; exit 1; }
rm -f "$ROOT.log"

# Package lists, caches, documentation and translations are dead weight in a
# sandbox that never runs apt: about half of the tree.
rm -rf "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/* \
       "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
       "$ROOT"/usr/share/locale/*

log "importing as $TAG"
tar --numeric-owner -C "$ROOT" -c . | docker import \
    --change "LABEL codeward.base=$LABEL" \
    --change "LABEL codeward.base.suite=$SUITE" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$TAG" >/dev/null
echo "$TAG"
