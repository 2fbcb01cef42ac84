#!/usr/bin/env bash
# Imports under load, and the server's memory after them (issue 11), in one run:
# release build; allCountries.zip imported into a fresh database; `postal serve` started
# (its RSS once the first load is done is the baseline); then IMPORTS (default 5) re-imports
# of allCountries.zip, each while wrk sends billed /api/lookup requests of random real codes
# and the admin CLI tops up an account twice a second (first 20 s of the same load without
# an import, for comparison). Per import it prints: import seconds,
# wrk requests, max and p99 latency, non-2xx and socket errors, the slowest CLI top-up, the
# server's RSS once it has reloaded (and its ratio to the baseline), the WAL size left.
# Ends with `postal ledger verify`.
# Usage: bench/import-under-load.sh [imports, default 5] [wrk connections, default 16]
set -euo pipefail
cd "$(dirname "$0")/.."
IMPORTS=${1:-5}
CONNECTIONS=${2:-16}
source_zip=../shared/geonames/allCountries.zip
[[ -f $source_zip ]] || { echo "bench: $source_zip not found" >&2; exit 1; }
if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

cargo build --release --quiet --bin postal --bin postal-import
POSTAL=target/release/postal
IMPORT=target/release/postal-import

work=$(mktemp -d)
db=$work/postal.db
server=
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "machine: $(nproc) cores, $(uname -sr); source: $source_zip"
"$IMPORT" --db "$db" "$source_zip" >/dev/null
account=$($POSTAL --db "$db" account create --name bench)
account_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["accountId"])' "$account")
api_key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["apiKey"])' "$account")
$POSTAL --db "$db" account topup "$account_id" --usd 1000000 >/dev/null

# 20,000 random real (country, code) pairs as a wrk script.
python3 - "$api_key" "$work/lookup.lua" <<'PY'
import json, random, sys, zipfile
key, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile("../shared/geonames/allCountries.zip") as z:
    lines = z.read("allCountries.txt").decode().splitlines()
random.seed(7)
pairs = [l.split("\t")[:2] for l in random.sample(lines, 20000)]
with open(out, "w") as f:
    f.write("local bodies = {\n")
    for country, code in pairs:
        f.write("  %s,\n" % json.dumps(json.dumps({"apiKey": key, "zipcode": code, "country": country})))
    f.write("}\nlocal n = #bodies\n")
    f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
    f.write('request = function()\n  return wrk.format(nil, "/api/lookup", nil, bodies[math.random(n)])\nend\n')
PY

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$POSTAL --db "$db" serve --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server=$!
# Ready: the postal data is loaded (the RSS baseline is taken after that).
for _ in $(seq 600); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break
  sleep 0.1
done
rss_mb() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status"; }
reloads() { grep -c "new dataset loaded" "$work/server.log" || true; }
sleep 2
baseline=$(rss_mb)
echo "server RSS after its first load: ${baseline} MB"
echo
# The admin CLI tops up an account every half second until $1 exists; writes the slowest
# top-up (ms, the whole process: start, open, commit) to $work/cli.max.
cli_loop() {
  local slowest=0 s e
  echo 0 >"$work/cli.max"
  while [[ ! -f $1 ]]; do
    s=$(date +%s%N)
    $POSTAL --db "$db" account topup "$account_id" --usd 5.00 >/dev/null
    e=$(( ($(date +%s%N) - s) / 1000000 ))
    (( e > slowest )) && slowest=$e
    echo "$slowest" >"$work/cli.max"
    sleep 0.5
  done
}

# The same load and top-ups for 20 s without an import: what a top-up takes on this
# machine when nothing holds the write lock, to read the import rows against.
wrk -t2 -c"$CONNECTIONS" -d20s --latency --timeout 10s -s "$work/lookup.lua" \
  "http://127.0.0.1:$port" >"$work/wrk.txt" 2>&1 &
wrk_pid=$!
rm -f "$work/quiet.done"
cli_loop "$work/quiet.done" &
cli=$!
wait "$wrk_pid" || true
touch "$work/quiet.done"
wait "$cli"
echo "without an import, the same load: slowest CLI top-up $(cat "$work/cli.max") ms," \
  "$(grep -oE '[0-9]+ requests in' "$work/wrk.txt")"
echo

printf '%-7s %9s %9s %9s %9s %8s %10s %9s %11s %9s\n' import seconds requests "max ms" "p99 ms" errors "CLI max ms" "RSS MB" "RSS/first" "WAL MB"

for run in $(seq "$IMPORTS"); do
  before=$(reloads)
  wrk -t2 -c"$CONNECTIONS" -d600s --latency --timeout 10s -s "$work/lookup.lua" \
    "http://127.0.0.1:$port" >"$work/wrk.txt" 2>&1 &
  wrk_pid=$!
  sleep 2
  rm -f "$work/import.done"
  cli_loop "$work/import.done" &
  cli=$!
  start=$(date +%s.%N)
  "$IMPORT" --db "$db" "$source_zip" >/dev/null
  end=$(date +%s.%N)
  touch "$work/import.done"
  wait "$cli"
  # The server reloads within a few seconds; the load goes on until it has.
  for _ in $(seq 600); do
    [[ $(reloads) -gt $before ]] && break
    sleep 0.1
  done
  sleep 1
  kill -INT "$wrk_pid"
  wait "$wrk_pid" || true
  sleep 2
  rss=$(rss_mb)
  wal=$( [[ -f $db-wal ]] && stat -c %s "$db-wal" || echo 0)
  python3 - "$work/wrk.txt" "$start" "$end" "$(cat "$work/cli.max")" "$rss" "$baseline" "$wal" "$run" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
start, end, cli, rss, base, wal, run = sys.argv[2:]
def ms(v, unit):
    v = float(v)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
m = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", text)
mx = ms(*m.groups())
p99 = ms(*re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)", text, re.M).groups())
reqs = int(re.search(r"(\d+) requests in", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
print(f"{run:<7} {float(end) - float(start):9.1f} {reqs:9d} {mx:9.1f} {p99:9.1f} {errors:8d} "
      f"{int(cli):10d} {int(rss):9d} {int(rss) / int(base):11.2f} {int(wal) / 1e6:9.1f}")
PY
done
echo
$POSTAL --db "$db" ledger verify
