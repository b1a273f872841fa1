#!/usr/bin/env bash
#! Prints the Markdown table of every flag of every costlab command, read from each command's
#! -h (so it cannot drift from the binary); --write puts it in the manual's page on the
#! command line (docs/src/cli.md) between the `<!-- flags:begin -->` and `<!-- flags:end -->`
#! markers, --check exits 1 when the page's copy is stale.
#
# Usage: scripts/flag-table.sh [--check | --write]   (COSTLAB=path/to/costlab, default: the
# release build in $CARGO_TARGET_DIR or target/; PAGE=another Markdown file than docs/src/cli.md)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${COSTLAB:-${CARGO_TARGET_DIR:-$root/target}/release/costlab}
readme=${PAGE:-$root/docs/src/cli.md}
if [[ ! -x $bin ]]; then
    echo "flag-table: no costlab binary at $bin; build it (cargo build --release) or set COSTLAB" >&2
    exit 2
fi

# The subcommands listed in the "Commands:" section of `costlab WORDS --help`, without help.
subcommands() {
    "$bin" "$@" -h | awk '/^Commands:/ {on=1; next} /^$/ {on=0} on && $1 != "help" {print $1}'
}

# One table row per option of `costlab WORDS`: | command | flag | value | meaning |.
# --db is global: it is listed once, for `costlab` itself; -h and -V are clap's own.
rows() {
    local name="costlab${*:+ $*}"
    "$bin" "$@" -h | awk -v cmd="$name" -v top="$#" '
        /^Options:/ {on=1; next}
        /^[^ ]/ {on=0}
        on && /^ +-/ {
            line=$0
            sub(/^ +/, "", line)
            short=""
            if (line ~ /^-[A-Za-z], /) { short=substr(line, 1, 2); line=substr(line, 5) }
            flag=line; sub(/ .*/, "", flag)
            rest=substr(line, length(flag) + 1)
            value=""
            if (rest ~ /^ [<[]/) { value=rest; sub(/^ /, "", value); sub(/  .*/, "", value); rest=substr(rest, length(value) + 2) }
            sub(/^ +/, "", rest)
            gsub(/ \[env: [^]]*\]/, "", rest)
            gsub(/\|/, "\\|", rest)
            # A <placeholder> in the prose would be read as an HTML tag by the manual.
            gsub(/</, "\\&lt;", rest)
            gsub(/>/, "\\&gt;", rest)
            gsub(/\|/, "\\|", value)
            if (flag == "--help" || flag == "--version") next
            if (flag == "--db" && top > 0) next
            if (short != "") flag = flag " (" short ")"
            printf "| `%s` | `%s` | %s | %s |\n", cmd, flag, (value == "" ? "" : "`" value "`"), rest
        }'
}

table() {
    echo "| command | flag | value | meaning |"
    echo "|---|---|---|---|"
    rows
    local c s
    for c in $(subcommands); do
        rows "$c"
        for s in $(subcommands "$c"); do
            rows "$c" "$s"
        done
    done
}

# The page's lines between the markers.
current() {
    awk '/<!-- flags:end -->/ {on=0} on {print} /<!-- flags:begin -->/ {on=1}' "$readme"
}

case ${1:-} in
    "")
        table
        ;;
    --check)
        if ! grep -q '<!-- flags:begin -->' "$readme"; then
            echo "flag-table: $readme has no <!-- flags:begin --> marker" >&2
            exit 1
        fi
        if ! diff -u <(current) <(table) >&2; then
            echo "flag-table: the flag table in $readme is stale; run scripts/flag-table.sh --write" >&2
            exit 1
        fi
        ;;
    --write)
        new=$(table)
        awk -v new="$new" '
            /<!-- flags:begin -->/ {print; print new; skip=1; next}
            /<!-- flags:end -->/ {skip=0}
            !skip {print}' "$readme" >"$readme.tmp"
        mv "$readme.tmp" "$readme"
        ;;
    *)
        echo "flag-table: unknown argument '$1'; use --check, --write or nothing (print)" >&2
        exit 2
        ;;
esac
