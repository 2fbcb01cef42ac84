#!/usr/bin/env bash
# Load benchmark of the HTTP API, in one run on this machine:
#   (a) a bare poem handler returning a constant JSON body (bench/bare.rs),
#   (b) billed /api/lookup with random real codes of many countries,
#   (c) /api/validate-bulk with 1,000 records (median server totalTime).
# Prints requests/s, p50 and p99 for (a) and (b), the ratio b/a, and (c).
# Usage: [ROUNDS=3] bench/api.sh [seconds per run, default 10] [connections, default 64]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${1:-10}
CONNECTIONS=${2:-64}
OUT=bench/out
DB=$OUT/bench.db
mkdir -p "$OUT"

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

cargo build --release --quiet --bin postal --bin postal-import --example bare
POSTAL=target/release/postal

# The full dataset, imported once and kept for later runs.
if [ ! -f "$DB" ]; then
  target/release/postal-import --db "$DB" ../shared/geonames/allCountries.zip
fi
account=$($POSTAL --db "$DB" account create --name bench)
account_id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
api_key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
$POSTAL --db "$DB" account topup "$account_id" --usd 1000000 >/dev/null

# 20,000 random real (country, code) pairs of every country, as a Lua table and a bulk body.
python3 - "$api_key" "$OUT" <<'PY'
import json, random, sys, zipfile
key, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile("../shared/geonames/allCountries.zip") as z:
    lines = z.read("allCountries.txt").decode().splitlines()
random.seed(7)
pairs = [l.split("\t")[:2] for l in random.sample(lines, 20000)]
with open(f"{out}/lookup.lua", "w") as f:
    f.write("local bodies = {\n")
    for country, code in pairs:
        f.write("  %s,\n" % json.dumps(json.dumps({"apiKey": key, "zipcode": code, "country": country})))
    f.write("}\nlocal n = #bodies\nlocal i = 0\n")
    f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
    f.write("request = function()\n  i = i + 1\n  if i > n then i = 1 end\n"
            '  return wrk.format(nil, "/api/lookup", nil, bodies[math.random(n)])\nend\n')
records = [{"postalCode": code, "countryCode": country} for country, code in pairs[:1000]]
with open(f"{out}/bulk.json", "w") as f:
    json.dump({"apiKey": key, "records": records}, f)
PY

$POSTAL --db "$DB" serve --listen 127.0.0.1:18080 >"$OUT/server.log" 2>&1 &
server=$!
target/release/examples/bare 127.0.0.1:18081 &
bare=$!
trap 'kill $server $bare 2>/dev/null || true' EXIT
for port in 18080 18081; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
  done
done

run_wrk() { # url script -> prints "rps p50_ms p99_ms"
  wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency -s "$2" "$1" >"$OUT/wrk.txt"
  python3 - "$OUT/wrk.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s+%s\s+([\d.]+)(us|ms|s)\s*$" % re.escape(label), text, re.M)
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
errors = int(non2xx.group(1)) if non2xx else 0
print(f"{rps:.0f} {ms('50%'):.3f} {ms('99%'):.3f} {errors}")
PY
}

# Warm-up, then ROUNDS rounds of (a) and (b) back to back; the machine is shared and
# noisy, so the figures are medians and the ratio is the median of the paired ratios.
ROUNDS=${ROUNDS:-3}
wrk -t2 -c"$CONNECTIONS" -d2s -s "$OUT/lookup.lua" http://127.0.0.1:18080 >/dev/null
: >"$OUT/rounds.txt"
for round in $(seq "$ROUNDS"); do
  read -r a_rps a_p50 a_p99 a_err < <(run_wrk http://127.0.0.1:18081 "$OUT/lookup.lua")
  read -r b_rps b_p50 b_p99 b_err < <(run_wrk http://127.0.0.1:18080 "$OUT/lookup.lua")
  echo "$a_rps $a_p50 $a_p99 $a_err $b_rps $b_p50 $b_p99 $b_err" >>"$OUT/rounds.txt"
  printf 'round %s: bare %s req/s (p99 %s ms), lookup %s req/s (p99 %s ms, non-2xx %s)\n' \
    "$round" "$a_rps" "$a_p99" "$b_rps" "$b_p99" "$b_err"
done

# (c): 30 sequential bulk requests of 1,000 records; the server's own totalTime.
bulk_median=$(for _ in $(seq 30); do
  curl -s -X POST -H 'Content-Type: application/json' --data-binary @"$OUT/bulk.json" \
    http://127.0.0.1:18080/api/validate-bulk
  echo
done | python3 -c '
import json, statistics, sys
times = [float(json.loads(l)["performance"]["totalTime"][:-2]) for l in sys.stdin if l.strip()]
print(f"{statistics.median(times):.3f}")')

python3 - "$OUT/rounds.txt" "$CONNECTIONS" "$SECONDS_PER_RUN" "$bulk_median" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
ratio = statistics.median(r[4] / r[0] for r in rows)
print(f"connections: {sys.argv[2]}, {sys.argv[3]} s per run, {len(rows)} rounds, wrk -t2 on the same 2 cores; medians:")
print(f"(a) bare handler   : {med(0):8.0f} req/s  p50 {med(1):6.3f} ms  p99 {med(2):6.3f} ms  non-2xx {sum(r[3] for r in rows):.0f}")
print(f"(b) billed lookup  : {med(4):8.0f} req/s  p50 {med(5):6.3f} ms  p99 {med(6):6.3f} ms  non-2xx {sum(r[7] for r in rows):.0f}")
print(f"ratio b/a          : {ratio:.2f} (median of the paired rounds)")
print(f"(c) bulk of 1,000  : median server totalTime {sys.argv[4]} ms (30 requests)")
PY
