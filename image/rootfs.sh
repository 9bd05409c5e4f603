#!/bin/sh
# Assemble a distroless-style root filesystem in $1 from the builder's Debian packages:
# the CPython interpreter, the standard library a daemon can need, the shared libraries that
# the interpreter and every extension module link against (found with ldd, so this works on
# any architecture), the virtualenv $2 with the autoscaler, and passwd/group entries for
# 65534. No shell, no package manager, no coreutils: nothing to exec but the autoscaler.
set -eu
root="$1"
venv="$2"
py=$(readlink -f /usr/bin/python3)           # /usr/bin/python3.11
ver=$(basename "$py")                          # python3.11
stdlib="/usr/lib/$ver"

# Parts of the standard library that a daemon never imports: test suites, GUIs, build and
# install tooling, terminals, audio, NIS and database bindings (whose shared libraries,
# Kerberos among them, would come along). Everything else stays, so no import can surprise.
unused="test idlelib tkinter turtledemo ensurepip lib2to3 pydoc_data distutils venv sqlite3
dbm curses unittest/test ctypes/test turtle.py"
unused_ext="_test* _ctypes_test xxlimited* _xx* _tkinter _sqlite3 _dbm _gdbm _curses*
readline nis _crypt ossaudiodev audioop"

mkdir -p "$root"

# Compile every module once, in place (so tracebacks show the real paths) and as root, so
# the read-only container never writes or recompiles bytecode (unchecked-hash: valid
# whatever the file times).
skip=$(printf '%s|' $unused)
"$py" -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
    -x "^$stdlib/(${skip%|})(/|$)" "$stdlib" "$venv/lib" >/dev/null

# Merged-/usr layout as Debian has it, so the ELF interpreter path (/lib64/ld-linux-...)
# and the library paths resolve the same way.
for link in bin lib lib64 sbin; do
    if [ -L "/$link" ]; then
        target=$(readlink "/$link")
        mkdir -p "$root/${target#/}"
        ln -s "$target" "$root/$link"
    fi
done

# copy PATH...: each path with its parents, and for a symlink the file it points at too.
copy() {
    for p in "$@"; do
        cp -a --parents "$p" "$root"
        if [ -L "$p" ]; then
            copy "$(readlink -f "$p")"
        fi
    done
}

copy /usr/bin/python3 "$py" "$stdlib" "/etc/$ver" "$venv"
for conf in /usr/lib/ssl/openssl.cnf; do
    if [ -e "$conf" ]; then copy "$conf"; fi
done
for dir in $unused; do
    rm -rf "${root:?}$stdlib/$dir"
done
for ext in $unused_ext; do
    rm -f "$root$stdlib"/lib-dynload/$ext.cpython-*.so
done
rm -f "$root$stdlib"/__pycache__/turtle.*

# Shared libraries: every ELF file in the tree, through ldd, until nothing new appears.
ldd_targets() {
    find "$root/usr/bin" "$root/usr/lib" "$root$venv" -type f \
        \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) \
        -exec sh -c 'for f; do ldd "$f" 2>/dev/null || true; done' sh '{}' + \
        | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(/ {print $1}' \
        | sort -u
}
while :; do
    added=0
    for lib in $(ldd_targets); do
        if [ ! -e "$root$lib" ]; then
            copy "$lib"
            added=1
        fi
    done
    [ "$added" = 1 ] || break
done

mkdir -p "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
    > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
ln -s "$venv/bin/cluster-proportional-autoscaler" "$root/cluster-proportional-autoscaler"
# The vertical autoscaler at CPVA's path (its manifests run `command: [/cpvpa, ...]`);
# the ENTRYPOINT stays the autoscaler's.
ln -s "$venv/bin/cpvpa" "$root/cpvpa"
