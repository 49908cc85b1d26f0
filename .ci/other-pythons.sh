#!/usr/bin/env bash
# The platform, local-executor and security tests on every other CPython codeward claims (3.12, 3.13),
# each in a virtual environment of its own made with the README's install command. The venvs are
# kept outside the checkout and reused; the 3.12 one also serves the codec's cross-interpreter test.
#
#   other-pythons.sh prepare   make and install the venvs (what the README's suite needs of them)
#   other-pythons.sh test      run their tests, one Python after the other, each whatever the other's outcome
#   other-pythons.sh           both
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT="${CODEWARD_PYTHONS_DIR:-/var/cache/codeward}"
VERSIONS=(3.12 3.13)
log() { echo "[other-pythons] $*" >&2; }

interpreter() {
    local version="$1" root
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for candidate in "$root"/versions/"$version"*/bin/python"$version" "$(command -v "python$version" || true)"; do
        [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    return 1
}

prepare() {
    local version base venv
    for version in "${VERSIONS[@]}"; do
        base="$(interpreter "$version")" || { log "CPython $version is not on this machine"; exit 1; }
        venv="$ROOT/py$version"
        [ -x "$venv/bin/python" ] || { log "making $venv from $base"; mkdir -p "$ROOT"; "$base" -m venv "$venv"; }
        "$venv/bin/python" -m pip install -q -e ".[test]"
    done
}

run_tests() {
    local version failed=()
    for version in "${VERSIONS[@]}"; do
        log "Python $version: platform, local executor and security tests"
        # Run once, on the README's Python, what does not depend on the interpreter: each rule of the confinement
        # attacked alone and the host's policing of its worker (the kernel's and the host's to judge), and the
        # attack suite's check of itself (whether each attack notices a missing sandbox is a property of the test).
        # The generated programs compare this interpreter with itself: a tenth of the main run's count is enough.
        CODEWARD_GENERATED_PROGRAMS=250 "$ROOT/py$version/bin/python" -m pytest -p no:cacheprovider -q \
            tests/platform tests/executors/local tests/security \
            --ignore=tests/executors/local/test_confinement_rules.py \
            --ignore=tests/executors/local/test_host_polices_worker.py \
            --ignore=tests/security/test_harness.py || failed+=("$version")
    done
    # every Python runs, so that one failing does not hide what the next would say
    [ ${#failed[@]} -eq 0 ] || { log "tests failed on Python ${failed[*]}"; return 1; }
}

case "${1:-all}" in
    prepare) prepare ;;
    test) run_tests ;;
    all) prepare && run_tests ;;
    *) log "usage: $0 [prepare|test]"; exit 2 ;;
esac
