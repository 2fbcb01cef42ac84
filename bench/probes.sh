#!/usr/bin/env bash
# The costliest requests we know of, each sent N times (default 200) one after the other
# to postal serve (release, write-behind) on bench/api.sh's database (the full dataset):
# the server's CPU per request from /proc (user + system, all threads), median wall time,
# and the status each got. Issue "Hardening v2" asks that the worst request cost at most
# 5 ms of server CPU; docs/http.md keeps the table. A plain lookup is the yardstick.
# Usage: [N=200] bench/probes.sh   (run bench/api.sh once first: its database and key)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
OUT=$PWD/bench/out
DB=$OUT/bench.db
[ -f "$DB" ] || { echo "run bench/api.sh once first (it imports $DB)" >&2; exit 1; }
source bench/lib.sh
POSTAL=$(this_postal)
PROBE_DB=$OUT/probes.db
rm -f "$PROBE_DB" "$PROBE_DB-wal" "$PROBE_DB-shm"
python3 -c 'import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)' "$DB" "$PROBE_DB"
account=$($POSTAL --db "$PROBE_DB" account create --name probes)
account_id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
$POSTAL --db "$PROBE_DB" account topup "$account_id" --usd 100000 >/dev/null
$POSTAL --db "$PROBE_DB" serve --listen 127.0.0.1:18090 >"$OUT/probes.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  curl -sf http://127.0.0.1:18090/readyz >/dev/null 2>&1 && break
  sleep 0.5
done
python3 - "$server" "$key" "$N" <<'PY'
import http.client, json, os, statistics, sys, time
pid, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ticks = os.sysconf("SC_CLK_TCK")
def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
s2 = "s2 " * 66                      # 198 characters, 66 words that look like codes
squared = "\u33af" * 200              # 200 characters that transliterate to 1,200
mixed = ("Frankfurt am Main " * 11)[:200]
normal = [{"postalCode": "60311", "countryCode": "DE", "city": "Frankfurt am Main"} for _ in range(1000)]
records = [{"postalCode": "60311", "countryCode": "DE", "city": squared} for _ in range(1000)]
kanji = "\u5bcc " * 100                 # 200 characters, 100 words kept as written
def bulk_of(city):
    return [{"postalCode": "60311", "countryCode": "DE", "city": city} for _ in range(1000)]
points = [{"latitude": -60.0 + i * 0.12, "longitude": (i % 360) - 180.0} for i in range(1000)]
probes = [
    ("lookup 90210 (yardstick)", "/api/lookup", {"apiKey": key, "zipcode": "90210"}),
    ("city: 's2 ' x 66 (198 chars), DE", "/api/city", {"apiKey": key, "city": s2, "country": "DE"}),
    ("city: U+33AF x 200, DE", "/api/city", {"apiKey": key, "city": squared, "country": "DE"}),
    ("city: 'Frankfurt am Main' x 11 (200 chars)", "/api/city", {"apiKey": key, "city": mixed, "country": "DE"}),
    ("city: 's2 ' x 66, no country", "/api/city", {"apiKey": key, "city": s2}),
    ("verify: U+33AF x 200, 60311 DE", "/api/verify", {"apiKey": key, "zipcode": "60311", "city": squared, "country": "DE"}),
    ("verify: 's2 ' x 66, 60311 DE", "/api/verify", {"apiKey": key, "zipcode": "60311", "city": s2, "country": "DE"}),
    ("verify-bulk: 1,000 records of U+33AF x 200", "/api/verify-bulk", {"apiKey": key, "records": records}),
    ("verify-bulk: 1,000 records of 's2 ' x 66", "/api/verify-bulk", {"apiKey": key, "records": bulk_of(s2)}),
    ("verify-bulk: 1,000 records of 'Frankfurt am Main' x 11", "/api/verify-bulk", {"apiKey": key, "records": bulk_of(mixed)}),
    ("verify-bulk: 1,000 records of '\u5bcc ' x 100", "/api/verify-bulk", {"apiKey": key, "records": bulk_of(kanji)}),
    ("verify-bulk: 1,000 records of 'Frankfurt am Main' (yardstick)", "/api/verify-bulk", {"apiKey": key, "records": normal}),
    ("nearest-bulk: 1,000 points x 100 nearest (answer not kept)", "/api/nearest-bulk", {"apiKey": key, "records": points, "limit": 100}),
    ("nearest-bulk: 1,000 points x 10 nearest (yardstick)", "/api/nearest-bulk", {"apiKey": key, "records": points, "limit": 10}),
    ("suggest: 'a' (prefix of everything)", "/api/suggest", {"apiKey": key, "q": "a", "limit": 20}),
    ("city: 201 chars (refused by its limit)", "/api/city", {"apiKey": key, "city": "x" * 201, "country": "DE"}),
]
conn = http.client.HTTPConnection("127.0.0.1", 18090)
print(f"{n} requests each, one after the other; server CPU from /proc/{pid}/stat")
print(f"| probe | status | body bytes | median wall ms | server CPU ms/request |")
print(f"|---|---|---|---|---|")
for name, path, body in probes:
    data = json.dumps(body, ensure_ascii=False).encode()
    for _ in range(5):  # warm
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        conn.getresponse().read()
    walls, statuses = [], set()
    before = cpu()
    for _ in range(n):
        t = time.perf_counter()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        walls.append(time.perf_counter() - t)
        statuses.add(r.status)
    used = (cpu() - before) / ticks / n * 1e3
    print(f"| {name} | {','.join(map(str, sorted(statuses)))} | {len(data):,} | "
          f"{statistics.median(walls) * 1e3:.3f} | {used:.3f} |")
PY
