#!/usr/bin/env bash
# The Python environment of every `make` target that needs the package (the Makefile runs
# this first). Silent, and quick, when the environment is ready.
#
#   scripts/pyenv.sh PYTHON VENV
#
# pip runs quietly, with a line a minute (scripts/heartbeat.sh) counting the packages so far.
#
# PYTHON is VENV/bin/python (the Makefile's default): the project's venv. Created on first
# use from the first python3 >= 3.11 with the venv module found on PATH (python3,
# python3.14 ... python3.11; BASE_PYTHON=... names one), recreated when it no longer runs
# (its interpreter was removed or upgraded away), and the package installed into it
# (`pip install -e '.[test,bench]'`) whenever its stamp, VENV/.cpa-installed, does not
# match this checkout and this pyproject.toml, or a requirement is missing from it
# (scripts/pyenv_check.py): a stale stamp cannot hide a broken venv.
#
# Any other PYTHON (`make PYTHON=...`) is used as it is. pip runs in it only when it is a
# virtual environment (stamp: .cache/pyenv/, by its prefix); the system's interpreter is
# never changed, a missing package there is an error saying what to do.
set -euo pipefail

python="$1"
venv="$2"
extras=(test bench)
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

say() { printf 'make: %s\n' "$*" >&2; }
. "$repo/scripts/heartbeat.sh"

# Python >= 3.11 that can make a venv (Debian/Ubuntu ship `venv` without ensurepip unless
# python3-venv is installed).
usable() { "$1" -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' \
    >/dev/null 2>&1; }
is_venv() { "$1" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' >/dev/null 2>&1; }
runs_311() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }

find_base() {
    if [[ -n "${BASE_PYTHON:-}" ]]; then
        usable "$BASE_PYTHON" && { command -v "$BASE_PYTHON"; return; }
        say "BASE_PYTHON=$BASE_PYTHON is not a Python >= 3.11 with the venv module"
        return 1
    fi
    # Not the venv's own bin directory (the Makefile puts it first on PATH).
    local abs_bin path="" dir found=() candidate exe
    abs_bin="$(realpath -m "$venv/bin")"
    IFS=: read -ra dirs <<<"$PATH"
    for dir in "${dirs[@]}"; do
        [[ "$(realpath -m "$dir" 2>/dev/null)" == "$abs_bin" ]] || path+="${path:+:}$dir"
    done
    for candidate in python3 python3.14 python3.13 python3.12 python3.11; do
        exe="$(PATH="$path" command -v "$candidate" 2>/dev/null)" || continue
        if usable "$exe"; then
            echo "$exe"
            return
        fi
        found+=("$exe ($("$exe" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null ||
            echo 'does not run'))")
    done
    say "no Python >= 3.11 with the venv module on PATH to make $venv from"
    say "  found: ${found[*]:-none}"
    say "  install one (Debian 12/Ubuntu 24.04: apt-get install python3 python3-venv), or name"
    say "  it: make BASE_PYTHON=/path/to/python3.12 ..."
    return 1
}

stamp_key() {   # what the install was made from: this checkout, its pyproject.toml, extras
    printf '%s\n' "$repo" "$(sha256sum pyproject.toml | cut -d' ' -f1)" "${extras[*]}" \
        "$("$python" -c 'import sys; print(sys.version)')"
}

install_if_needed() {   # install_if_needed STAMP
    local stamp="$1" absent
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$(stamp_key)" ]] &&
        "$python" scripts/pyenv_check.py "$repo" "${extras[@]}" >/dev/null; then
        return 0
    fi
    absent="$("$python" scripts/pyenv_check.py "$repo" "${extras[@]}" || true)"
    local spec prefix
    prefix="$("$python" -c 'import sys; print(sys.prefix)')"
    spec=".[$(IFS=,; echo "${extras[*]}")]"
    say "installing the package and its test tools into $prefix${absent:+ (missing: $absent)}"
    say "  (pip install -e '$spec': its packages from PyPI or pip's cache; a line a minute"
    say "  until it is done; how long a cold one takes: README.md, The two commands)"
    # pip's own output is one line per package, hundreds when they are already there: a
    # line a minute with the packages installed so far says more.
    trap heartbeat_stop EXIT
    heartbeat_start "make: pip install" \
        "echo \"\$(ls -d '$prefix'/lib/python3*/site-packages/*.dist-info 2>/dev/null | wc -l) packages in $prefix\""
    "$python" -m pip install --quiet --disable-pip-version-check -e "$spec"
    heartbeat_stop
    say "installed: $(ls -d "$prefix"/lib/python3*/site-packages/*.dist-info 2>/dev/null | wc -l) packages in $prefix"
    "$python" scripts/pyenv_check.py "$repo" "${extras[@]}" >/dev/null || {
        say "after pip install, still missing: $("$python" scripts/pyenv_check.py "$repo" "${extras[@]}" || true)"
        return 1
    }
    mkdir -p "$(dirname "$stamp")"
    stamp_key >"$stamp"
}

if [[ "$python" != "$venv/bin/python" ]]; then
    # PYTHON=... given: use it as it is.
    if ! runs_311 "$python"; then
        say "PYTHON=$python is not a Python >= 3.11 that runs"
        exit 2
    fi
    if is_venv "$python"; then
        prefix="$("$python" -c 'import sys; print(sys.prefix)')"
        install_if_needed ".cache/pyenv/$(printf '%s' "$prefix" | sha256sum | cut -c1-16).stamp"
        exit 0
    fi
    if absent="$("$python" scripts/pyenv_check.py "$repo" "${extras[@]}")"; then
        exit 0
    fi
    say "PYTHON=$python is not a virtual environment and lacks: $absent"
    say "  make never runs pip on it (a distribution's Python refuses it anyway): leave"
    say "  PYTHON unset (make uses $venv, made and filled on first use), or point it at a venv"
    exit 2
fi

if [[ -e "$venv" ]] && ! { runs_311 "$python" && is_venv "$python"; }; then
    if [[ ! -f "$venv/pyvenv.cfg" && -n "$(ls -A "$venv" 2>/dev/null)" ]]; then
        say "$venv exists but is not a venv (no pyvenv.cfg): move it away, make recreates it"
        exit 2
    fi
    say "$venv no longer runs a Python >= 3.11 (its interpreter is gone?): recreating it"
    rm -rf "$venv"
fi
if [[ ! -e "$venv" ]]; then
    base="$(find_base)" || exit 2
    say "creating $venv with $("$base" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    "$base" -m venv "$venv"
fi
install_if_needed "$venv/.cpa-installed"
