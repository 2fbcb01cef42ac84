#!/usr/bin/env bash
# The OpenAPI document as a product (issue 12): lint it, generate a Python and a
# TypeScript client from it, and run a short program in each against a real server on the
# sample data. Installs what it needs: npm packages pinned in package-lock.json, and
# openapi-python-client in a venv under clients/.venv. Run from anywhere:
#   bash clients/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
shared="$root/../shared/geonames"
cd "$root"

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== tools"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
if [ ! -x "$here/.venv/bin/openapi-python-client" ]; then
  python3 -m venv "$here/.venv"
  "$here/.venv/bin/pip" install --quiet --disable-pip-version-check "openapi-python-client==0.29.1"
fi

echo "== lint (redocly, config clients/redocly.yaml)"
(cd "$here" && npx --no-install redocly lint --config redocly.yaml "$root/openapi.yaml")

echo "== server on the sample data"
# The binaries `cargo test` builds (its dev-dependencies change features of shared crates,
# so a plain `cargo build` would compile the whole tree a second time beside them).
cargo test --quiet --no-run --lib --bins --tests
db="$work/postal.db"
target/debug/postal-import --db "$db" "$shared/sample.zip" >/dev/null
account=$(target/debug/postal --db "$db" account create --name clients)
key=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])' <<<"$account")
# The GET forms take a publishable key in the URL (docs/browser.md), sent from its page.
origin=https://clients.example
publishable=$(target/debug/postal --db "$db" key create \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])' <<<"$account")" \
  --publishable --origin "$origin" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/debug/postal --db "$db" serve --listen "127.0.0.1:$port" 2>"$work/server.log" &
server_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  curl -fs -o /dev/null -X POST "$base/api/aboutapi" -d "{\"apiKey\":\"$key\"}" && break
  sleep 0.1
done

echo "== Python client (openapi-python-client)"
"$here/.venv/bin/openapi-python-client" generate --path "$root/openapi.yaml" \
  --config "$here/python-config.yaml" --output-path "$work/py/postal_client" --meta none --overwrite --fail-on-warning
PYTHONPATH="$work/py" "$here/.venv/bin/python" "$here/check.py" "$base" "$key" "$publishable" "$origin"

echo "== TypeScript client (openapi-typescript + openapi-fetch)"
(cd "$here" && npx --no-install openapi-typescript "$root/openapi.yaml" -o generated/schema.d.ts >/dev/null \
  && npx --no-install tsc --noEmit -p tsconfig.json \
  && npx --no-install tsx check.ts "$base" "$key" "$publishable" "$origin")
echo "clients: all checks passed"
