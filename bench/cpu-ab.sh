#!/usr/bin/env bash
# Server CPU per billed lookup of this version against another commit of ours and the bare
# poem handler, in one run: ROUNDS rounds of the three back to back (wrk -t2 -c64, 5 s
# each, the same random US codes as bench/api.sh's row w), CPU from /proc/<pid>/stat
# (user + system, all threads) per answered request, and the medians of the per-round
# ratios. Unlike bench/api.sh's BASE=, the other commit gets a database of its own,
# imported by its own postal-import, so a commit of any schema can be compared (api.sh
# copies this version's file, which an older binary refuses).
# With `--without-hot-path` instead of a commit, the other server is this binary answering
# POST /api/lookup through poem's routing (`postal serve --without-hot-path`), on a copy
# of this version's database: the hot path's own effect, with nothing else changed.
# SERVE_FLAGS (e.g. --durable-charges) are given to both postal servers. SCRIPT names
# the wrk script of bench/out both get (default us-post.lua; another one, such as
# us-get-pub.lua, only with --without-hot-path, where both servers hold the same keys).
# Usage: [ROUNDS=4] [SERVE_FLAGS=...] [SCRIPT=...] bench/cpu-ab.sh <commit>|--without-hot-path   (run bench/api.sh once
# first: its database, account and Lua scripts in bench/out are reused)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
[ -f "$OUT/bench.db" ] && [ -f "$OUT/us-post.lua" ] || { echo "run bench/api.sh first" >&2; exit 2; }
source bench/lib.sh
POSTAL=$(this_postal --example bare)
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
if [ "${1:-}" = --without-hot-path ]; then
  BASE=poem-route
  OLD="$POSTAL"
  OLD_FLAGS=(--without-hot-path)
  OLD_DB=$OUT/ab-poem-route.db
  rm -f "$OLD_DB" "$OLD_DB-wal" "$OLD_DB-shm"
  "$POSTAL" --db "$OUT/bench.db" backup "$OLD_DB" >/dev/null
  cp "$OUT/${SCRIPT:-us-post.lua}" "$OUT/us-post-ab.lua"
else
  [ "${SCRIPT:-us-post.lua}" = us-post.lua ] || { echo "SCRIPT only with --without-hot-path" >&2; exit 2; }
  BASE=$(base_commit "${1:?usage: bench/cpu-ab.sh <commit>|--without-hot-path}")
  build_base "$BASE" "$OUT"
  OLD=$OUT/postal-$BASE
  OLD_FLAGS=()
  OLD_DB=$OUT/ab-$BASE.db
  [ -f "$OLD_DB" ] || "$OUT/postal-import-$BASE" --db "$OLD_DB" ../shared/geonames/allCountries.zip >/dev/null
  account=$("$OLD" --db "$OLD_DB" account create --name cpu-ab)
  "$OLD" --db "$OLD_DB" account topup "$(echo "$account" | field accountId)" --usd 1000000 >/dev/null
  this_key=$(grep -m1 -o '"apiKey\\": \\"[^\\]*' "$OUT/us-post.lua" | sed 's/.*\\"//')
  sed "s/$this_key/$(echo "$account" | field apiKey)/g" "$OUT/us-post.lua" >"$OUT/us-post-ab.lua"
fi

"$OLD" --db "$OLD_DB" serve "${OLD_FLAGS[@]}" ${SERVE_FLAGS:-} --listen 127.0.0.1:18094 >"$OUT/server-ab.log" 2>&1 &
old=$!
$POSTAL --db "$OUT/bench.db" serve ${SERVE_FLAGS:-} --listen 127.0.0.1:18090 >"$OUT/server-ab-this.log" 2>&1 &
this=$!
target/release/examples/bare 127.0.0.1:18091 >/dev/null 2>&1 &
bare=$!
trap 'kill $old $this $bare 2>/dev/null || true' EXIT
for port in 18094 18090 18091; do
  for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/openapi.json" && break; sleep 0.1; done
done

run() { # port script pid -> "rps cpu_us_per_request"
  local before after out
  before=$(awk '{print $14 + $15}' "/proc/$3/stat")
  out=$(wrk -t2 -c64 -d5s -s "$2" "http://127.0.0.1:$1")
  after=$(awk '{print $14 + $15}' "/proc/$3/stat")
  if echo "$out" | grep -q "Non-2xx"; then echo "non-2xx answers on port $1" >&2; exit 1; fi
  python3 - "$out" "$((after - before))" "$(getconf CLK_TCK)" <<'PY'
import re, sys
out, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = int(re.search(r"(\d+) requests in", out).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
print(f"{rps:.0f} {ticks / hz / n * 1e6:.2f}")
PY
}
run 18094 "$OUT/us-post-ab.lua" $old >/dev/null
run 18090 "$OUT/${SCRIPT:-us-post.lua}" $this >/dev/null
run 18091 "$OUT/us-post.lua" $bare >/dev/null
: >"$OUT/ab-rounds.txt"
for round in $(seq "${ROUNDS:-4}"); do
  a=$(run 18091 "$OUT/us-post.lua" $bare)
  o=$(run 18094 "$OUT/us-post-ab.lua" $old)
  t=$(run 18090 "$OUT/${SCRIPT:-us-post.lua}" $this)
  echo "$a $o $t" >>"$OUT/ab-rounds.txt"
  echo "round $round: bare $a | ${BASE:0:9} $o | this $t (req/s, server CPU us/req)"
done
python3 - "$OUT/ab-rounds.txt" "${BASE:0:9}" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
print(f"medians of {len(rows)} rounds: bare {med([r[1] for r in rows]):.2f} us/req, "
      f"{sys.argv[2]} {med([r[3] for r in rows]):.2f} us/req ({med([r[3] / r[1] for r in rows]):.2f}x bare), "
      f"this {med([r[5] for r in rows]):.2f} us/req ({med([r[5] / r[1] for r in rows]):.2f}x bare, "
      f"{med([r[5] / r[3] for r in rows]):.2f}x {sys.argv[2]})")
PY
