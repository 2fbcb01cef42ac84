#!/usr/bin/env bash
# Schemathesis against the real server: every check, a fixed seed, a time budget.
#
# Builds `postal` (debug), imports ../shared/geonames/sample.zip into a temporary
# database, creates an account with 1,000 USD, serves on a free port and runs
# schemathesis (in a venv it creates, from PyPI) on every operation of /openapi.json with
# the account's key put into each body by tests/schemathesis/hooks.py. Exits non-zero on
# any failure.
#
#   tests/schemathesis.sh            # 2 min 39 s on 2 cores shared with a benchmark run:
#                                    # 14 operations, 15,995 cases, 0 failures (fuzzing
#                                    # repeats until the 150 s budget is spent, so the
#                                    # count follows the machine's speed)
#   SCHEMATHESIS_MAX_EXAMPLES=20 tests/schemathesis.sh
#   SCHEMATHESIS_OPERATIONS='^/api/radius$' tests/schemathesis.sh   # one operation
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
VENV=${SCHEMATHESIS_VENV:-target/schemathesis-venv}
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-30}
MAX_TIME=${SCHEMATHESIS_MAX_TIME:-150}
SEED=${SCHEMATHESIS_SEED:-20261122}

if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$VERSION"; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "schemathesis==$VERSION"
fi

# The binaries `cargo test` builds (its dev-dependencies change features of shared crates,
# so a plain `cargo build` would compile the whole tree a second time beside them).
cargo test --quiet --no-run
tmp=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

db=$tmp/postal.db
target/debug/postal-import --db "$db" ../shared/geonames/sample.zip >/dev/null 2>&1
account=$(target/debug/postal --db "$db" account create --name schemathesis)
account_id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])' <<<"$account")
export POSTAL_API_KEY
POSTAL_API_KEY=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])' <<<"$account")
target/debug/postal --db "$db" account topup "$account_id" --usd 1000 >/dev/null

target/debug/postal --db "$db" serve --listen 127.0.0.1:0 2>"$tmp/server.log" &
server=$!
address=
for _ in $(seq 1 300); do
    address=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$tmp/server.log" | head -1)
    [ -n "$address" ] && break
    sleep 0.1
done
[ -n "$address" ] || { cat "$tmp/server.log"; echo "the server did not start" >&2; exit 1; }

# Every operation of the document (SCHEMATHESIS_OPERATIONS, a path regex, narrows it).
operations=()
[ -n "${SCHEMATHESIS_OPERATIONS:-}" ] && operations=(--include-path-regex "$SCHEMATHESIS_OPERATIONS")

export PYTHONPATH=tests/schemathesis SCHEMATHESIS_HOOKS=hooks
"$VENV/bin/schemathesis" run "http://$address/openapi.json" \
    --checks all \
    --seed "$SEED" \
    --max-examples "$MAX_EXAMPLES" \
    --max-time "$MAX_TIME" \
    --workers 2 \
    "${operations[@]}" \
    --no-color
