#!/usr/bin/env bash
# Geography benchmark, one command: a release server on the full dataset, then
# bench/geo/main.rs asks it nearest (limit 10), radius 25 km (London, Paris, New York) and
# nearest-bulk of 1,000, and prints processingTime p50/p99 beside a brute-force scan of
# every code in the same run; then the server's RSS growth over the run, and what the
# geography index alone costs (build time, RSS).
# Usage: bench/geo/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out
DB=$OUT/bench.db
PORT=${PORT:-$((20000 + RANDOM % 20000))}
mkdir -p "$OUT"

cargo build --release --quiet --bin postal --bin postal-import --example geo-bench
POSTAL=target/release/postal

# The full dataset, imported once and kept for later runs (shared with bench/api.sh).
if [ ! -f "$DB" ]; then
  target/release/postal-import --db "$DB" ../shared/geonames/allCountries.zip
fi
account=$($POSTAL --db "$DB" account create --name geo-bench)
account_id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
api_key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
$POSTAL --db "$DB" account topup "$account_id" --usd 1000 >/dev/null

$POSTAL --db "$DB" serve --listen "127.0.0.1:$PORT" >"$OUT/geo-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
  sleep 0.1
done
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$server/status"; }
rss_start=$(rss)

${GEO_BENCH_WRAP:-} target/release/examples/geo-bench "$DB" "http://127.0.0.1:$PORT" "$api_key"

rss_end=$(rss)
echo "server RSS: ${rss_start} MB after load, ${rss_end} MB after the run (growth $((rss_end - rss_start)) MB)"
