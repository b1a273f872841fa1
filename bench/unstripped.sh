#!/usr/bin/env bash
# Builds the must-show's stripped Debian programs again from the same upstream sources, with
# their symbols (-O2 -g, never stripped), so `costlab price` can name their samples by function:
#   - gzip (tar czf's child);
#   - sqlite3's shell with the library compiled in (one binary: no stripped libsqlite3.so);
#   - git, linked statically against zlib built here too (git log -p spends a good part of
#     its user time inflating objects in libz), unless GIT=0.
# Debian strips its binaries and its debug archive (debian-debug, debuginfod) is not reachable
# here, but its source pool is. The versions are the installed packages' own (dpkg-query), and
# each .orig tarball is the one the package's .dsc names, checked against the .dsc's SHA-256.
# Debian's patches are not applied (a few security fixes in git, build options in sqlite3):
# the functions are upstream's, the same code paths for gzip -c, git log -p and a CSV import.
#
# Usage: bash bench/unstripped.sh          builds what is missing, prints the bin folder
#        CACHE=DIR (default /var/tmp/costlab-bench) keeps the sources and builds; a second run
#        reuses them (nothing is rebuilt while $CACHE/bin/<program> exists).
#        JOBS=N (default 2) for make -j; GIT=0 skips git.
# Builds run under nice. Measured here (2 vCPUs shared with other builds, 2026-11-26, -j2):
# gzip 31 s, sqlite3 73 s, zlib 5 s, git 181 s (fetching included). Needs curl, gcc, make, tclsh
# (sqlite3 generates its amalgamation with it).
# bench/price-must-show.sh calls it under SYMBOLS=1; it prints only the bin folder on stdout.
set -euo pipefail
CACHE=${CACHE:-/var/tmp/costlab-bench}
JOBS=${JOBS:-2}
POOL=${POOL:-http://deb.debian.org/debian/pool/main}
SECURITY_POOL=${SECURITY_POOL:-http://security.debian.org/debian-security/pool/updates/main}
mkdir -p "$CACHE/src" "$CACHE/build" "$CACHE/bin"
log() { echo "unstripped: $*" >&2; }
die() {
    echo "unstripped: $*" >&2
    exit 2
}
for tool in curl gcc make tclsh dpkg-query sha256sum readelf; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install curl build-essential tcl binutils)"
done

# fetch_orig BINARY_PACKAGE: downloads the .orig tarball of the installed package's source
# into $CACHE/src (checked against its .dsc) and prints the path.
fetch_orig() {
    local pkg=$1 src ver nover up dir dsc url orig sum
    read -r src ver < <(dpkg-query -W -f '${source:Package} ${source:Version}\n' "$pkg") ||
        die "$pkg is not installed (dpkg-query)"
    nover=${ver#*:}    # no epoch
    up=${nover%-*}     # upstream version: no Debian revision
    case $src in lib*) dir=${src:0:4} ;; *) dir=${src:0:1} ;; esac
    dsc="$CACHE/src/${src}_${nover}.dsc"
    if [ ! -s "$dsc" ]; then
        for base in "$POOL" "$SECURITY_POOL"; do
            url="$base/$dir/$src/${src}_${nover}.dsc"
            curl -sSf -o "$dsc.part" "$url" 2>/dev/null && mv "$dsc.part" "$dsc" && break
        done
        [ -s "$dsc" ] || die "no ${src}_${nover}.dsc in $POOL or $SECURITY_POOL"
    fi
    # The .dsc's Checksums-Sha256 names the orig tarball: <sha256> <size> <src>_<up>.orig.tar.*
    read -r sum _ orig < <(sed -n '/^Checksums-Sha256:/,/^[A-Z]/p' "$dsc" |
        grep -E " ${src}_${up}\.orig\.tar\.[a-z0-9]+$") || die "$dsc names no orig tarball for $up"
    if [ ! -s "$CACHE/src/$orig" ]; then
        log "fetching $orig"
        for base in "$POOL" "$SECURITY_POOL"; do
            curl -sSf -o "$CACHE/src/$orig.part" "$base/$dir/$src/$orig" 2>/dev/null && break
        done
        [ -s "$CACHE/src/$orig.part" ] || die "could not fetch $orig from $POOL or $SECURITY_POOL"
        echo "$sum  $CACHE/src/$orig.part" | sha256sum -c --quiet - >&2 ||
            die "$orig does not match its .dsc's SHA-256"
        mv "$CACHE/src/$orig.part" "$CACHE/src/$orig"
    fi
    echo "$CACHE/src/$orig"
}

# unpack TARBALL NAME: a fresh copy of the source in $CACHE/build/NAME; prints its folder.
unpack() {
    local d="$CACHE/build/$2"
    rm -rf "$d"
    mkdir -p "$d"
    tar xf "$1" -C "$d" --strip-components=1
    echo "$d"
}

# has_symbols BINARY: a .symtab with function symbols, and debug info.
has_symbols() {
    readelf -S "$1" | grep -q ' \.symtab ' && readelf -S "$1" | grep -q ' \.debug_info '
}

timed() { # NAME CMD...: runs it, logging its wall time
    local t0=$SECONDS
    "${@:2}"
    log "$1 built in $((SECONDS - t0)) s"
}

build_gzip() {
    local o d
    o=$(fetch_orig gzip)
    d=$(unpack "$o" gzip)
    (cd "$d" && ./configure --quiet CFLAGS="-O2 -g" >/dev/null && nice -n 10 make -s -j"$JOBS" >/dev/null)
    cp "$d/gzip" "$CACHE/bin/gzip"
}

build_sqlite3() {
    local o d
    o=$(fetch_orig sqlite3)
    d=$(unpack "$o" sqlite3)
    # The orig tarball is sqlite's full source tree: `make sqlite3` generates the amalgamation
    # (sqlite3.c, with tclsh) and compiles the shell with it, so the library is in the binary.
    (cd "$d" && ./configure --quiet --disable-tcl --enable-shared=no CFLAGS="-O2 -g" >/dev/null &&
        nice -n 10 make -s -j"$JOBS" sqlite3 >/dev/null)
    cp "$d/sqlite3" "$CACHE/bin/sqlite3"
}

build_zlib() {
    local o d
    o=$(fetch_orig zlib1g)
    d=$(unpack "$o" zlib)
    (cd "$d" && CFLAGS="-O2 -g" ./configure --static --prefix="$CACHE/zlib" >/dev/null &&
        nice -n 10 make -s -j"$JOBS" libz.a >/dev/null && make -s install >/dev/null)
}

build_git() {
    local o d
    [ -f "$CACHE/zlib/lib/libz.a" ] || timed zlib build_zlib
    o=$(fetch_orig git)
    d=$(unpack "$o" git)
    # Only the git binary (its builtins: log is one), without the optional libraries; zlib
    # from $CACHE/zlib (static: libz.a is the only one there).
    (cd "$d" && nice -n 10 make -s -j"$JOBS" CFLAGS="-O2 -g" ZLIB_PATH="$CACHE/zlib" \
        NO_CURL=1 NO_EXPAT=1 NO_OPENSSL=1 NO_GETTEXT=1 NO_TCLTK=1 NO_PERL=1 NO_PYTHON=1 git >/dev/null)
    cp "$d/git" "$CACHE/bin/git"
}

want=(gzip sqlite3)
[ "${GIT:-1}" = 0 ] || want+=(git)
for p in "${want[@]}"; do
    if [ ! -x "$CACHE/bin/$p" ]; then
        log "building $p (-O2 -g) in $CACHE/build/$p"
        timed "$p" "build_$p"
    fi
    has_symbols "$CACHE/bin/$p" || die "$CACHE/bin/$p has no .symtab or .debug_info"
done
echo "$CACHE/bin"
