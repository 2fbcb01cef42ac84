#!/usr/bin/env bash
# Load benchmark of the HTTP API, in one run on this machine, the same random US codes:
#   (n) nginx serving one pre-rendered JSON file per US code (Zippopotamus' design),
#   (l) the same nginx writing an access line per request (buffered, as postal's are):
#       postal serve always writes one, so this is the peer doing the same work,
#   (a) a bare poem handler returning a constant JSON body (bench/bare.rs),
#   (w) postal billed /api/lookup, charges written behind (the default),
#   (d) postal billed /api/lookup with --durable-charges (answered after the commit),
# then (m) postal write-behind on random codes of every country, (g) the same server
# answering what a checkout page sends: GET /api/lookup?zipcode=..&key=pub_.. with an
# Origin header (a publishable key: origin check, per-IP count, CORS headers, Cache-Control),
# and (c) bulk answers: a 1,000-record /api/validate-bulk and a 1,000-point
# /api/nearest-bulk (10 codes a point), each sent BULK_REQUESTS times (default 300) one
# after the other without and with `Accept-Encoding: gzip`: the median server totalTime,
# the bytes of an answer on the wire (head and body as sent) and the server's CPU time per
# request (from /proc, as below: serializing and compressing the answer included).
# With BASE=<commit>, (p) that version of postal (write-behind) runs beside them: the
# previous version of our own code, on a copy of the same database.
# Prints per server (medians of ROUNDS paired rounds) requests/s, p50, p99, non-2xx and
# its CPU time per answered request (user + system of all its threads, nginx's workers
# summed, from /proc: on cores shared with wrk, that CPU is what bounds its requests/s)
# and that CPU as a ratio to the bare handler's (a) (median of the paired rounds), and its
# system calls (all its threads, counted by perf while wrk runs, when the kernel lets perf
# count them; "nan" when not) and voluntary and nonvoluntary context switches (/proc) per
# answered request;
# each one's ratio to nginx (n) and to nginx with its access log (l) (medians of the
# paired ratios); and how many billing flushes took 100 ms or more (the "slow billing
# flush" warnings in the logs of this version's two servers, warm-ups included: port
# PORT (18080) serves rows w, m and g and the bulk requests, PORT+3 row d), so that a durable p99 of
# that order shows whether its flushes were slow.
# With PIN=1 every server runs on core 0 and wrk (one thread) on core 1 (`taskset`), so
# that wrk's CPU cannot blur the servers' figures (issue 21's second figure).
# The servers listen on PORT (default 18080) to PORT+5: w, a, n, d, p, l; another PORT lets
# it run beside a server already on 18080.
# Usage: [ROUNDS=3] [BASE=<commit>] [PIN=1] [PORT=18080] bench/api.sh [seconds per run, default 8] [connections, default 64]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${1:-8}
CONNECTIONS=${2:-64}
OUT=$PWD/bench/out
DB=$OUT/bench.db
DURABLE_DB=$OUT/bench-durable.db
mkdir -p "$OUT"
PORT=${PORT:-18080}
P_WB=$PORT P_BARE=$((PORT + 1)) P_NGINX=$((PORT + 2)) P_DURABLE=$((PORT + 3))
P_BASE=$((PORT + 4)) P_NGINX_LOG=$((PORT + 5))

for tool in wrk nginx; do
  if ! command -v $tool >/dev/null; then
    echo "installing $tool (Debian package)" >&2
    (apt-get update -qq && apt-get install -y -qq $tool) >/dev/null
  fi
done
NGINX=$(command -v nginx)

source bench/lib.sh
# Unpinned, servers and wrk (two threads) share both cores.
SERVE_ON=()
WRK_ON=()
WRK_THREADS=2
if [ -n "${PIN:-}" ]; then
  SERVE_ON=(taskset -c 0)
  WRK_ON=(taskset -c 1)
  WRK_THREADS=1
fi
BASE=${BASE:-}
if [ -n "$BASE" ]; then
  BASE=$(base_commit "$BASE")
  build_base "$BASE" "$OUT"
fi
POSTAL=$(this_postal --bin postal-import --example bare)

# The full dataset, imported once and kept for later runs.
if [ ! -f "$DB" ]; then
  target/release/postal-import --db "$DB" ../shared/geonames/allCountries.zip
fi
account=$($POSTAL --db "$DB" account create --name bench)
account_id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
api_key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
$POSTAL --db "$DB" account topup "$account_id" --usd 1000000 >/dev/null
# Row g: a page's GET with a publishable key and its Origin (one client IP: no per-IP cap).
pub_key=$($POSTAL --db "$DB" key create "$account_id" --publishable --origin https://shop.example \
  --per-ip-minute 2000000000 | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
# Durable mode runs on its own copy: one server per file.
rm -f "$DURABLE_DB" "$DURABLE_DB-wal" "$DURABLE_DB-shm"
sqlite_copy() { python3 -c 'import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)' "$1" "$2"; }
sqlite_copy "$DB" "$DURABLE_DB"
BASE_DB=$OUT/bench-base.db
if [ -n "$BASE" ]; then
  rm -f "$BASE_DB" "$BASE_DB-wal" "$BASE_DB-shm"
  sqlite_copy "$DB" "$BASE_DB"
  # A base older than the file's schema refuses it: its copy loses what versions 12 (the
  # books' count of changes, the ledger's index by account), 11 (usage
  # per key) and 10 (providers' kinds) added, and a copy of a version 8 file what versions 7 (the account
  # dashboard's tables) and 8 (top-ups) added; same accounts, keys and data. The base
  # migrates the copy up to its own version.
  python3 - "$BASE_DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
if db.execute("PRAGMA user_version").fetchone()[0] == 13:
    # Version 13's columns stay: version 12 names the columns it writes, and the system
    # SQLite (older than the bundled one) cannot DROP COLUMN in a file whose schema uses
    # the trigram tokenizer's newer options.
    db.executescript("""DROP TABLE disputes; DROP INDEX accounts_by_origin;
        PRAGMA user_version = 12;""")
if db.execute("PRAGMA user_version").fetchone()[0] == 12:
    db.executescript("""
        DROP TRIGGER accounts_inserted; DROP TRIGGER accounts_updated; DROP TRIGGER accounts_deleted;
        DROP TRIGGER api_keys_inserted; DROP TRIGGER api_keys_updated; DROP TRIGGER api_keys_deleted;
        DROP TRIGGER oidc_providers_inserted; DROP TRIGGER oidc_providers_updated; DROP TRIGGER oidc_providers_deleted;
        DROP TRIGGER payment_settings_inserted; DROP TRIGGER payment_settings_updated; DROP TRIGGER payment_settings_deleted;
        DROP TABLE books_version; DROP INDEX ledger_by_account; PRAGMA user_version = 11;""")
if db.execute("PRAGMA user_version").fetchone()[0] == 11:
    db.executescript("""
        DROP TABLE usage_days; ALTER TABLE ledger DROP COLUMN key_id;
        PRAGMA user_version = 10;""")
if db.execute("PRAGMA user_version").fetchone()[0] == 10:
    db.executescript("""
        ALTER TABLE oidc_providers DROP COLUMN kind;
        ALTER TABLE oidc_providers DROP COLUMN allowed; PRAGMA user_version = 9;""")
if db.execute("PRAGMA user_version").fetchone()[0] == 8:
    db.executescript("""
        DROP TABLE topups; DROP TABLE payment_settings; PRAGMA user_version = 7;""")
if db.execute("PRAGMA user_version").fetchone()[0] == 7:
    db.executescript("""
        DROP TABLE oidc_providers; DROP TABLE identities; DROP TABLE sessions;
        DROP TABLE signins; DROP TABLE audit_log;
        ALTER TABLE api_keys DROP COLUMN name; ALTER TABLE api_keys DROP COLUMN hint;
        ALTER TABLE api_keys DROP COLUMN expires_at; PRAGMA user_version = 6;""")
db.close()
PY
fi

# 20,000 random real (country, code) pairs of every country; 20,000 random US codes with
# their first record pre-rendered as a file per code for nginx; Lua scripts; a bulk body.
rm -rf "$OUT/nginx-root"
python3 - "$api_key" "$OUT" "$pub_key" <<'PY'
import json, os, random, sys, zipfile
key, out, pub_key = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile("../shared/geonames/allCountries.zip") as z:
    lines = z.read("allCountries.txt").decode().splitlines()
random.seed(7)
sampled = [l.split("\t") for l in random.sample(lines, 20000)]
pairs = [f[:2] for f in sampled]
first_us = {}
for l in lines:
    f = l.split("\t")
    if f[0] == "US" and f[1] not in first_us:
        first_us[f[1]] = f
us_codes = random.sample(sorted(first_us), 20000)
root = f"{out}/nginx-root/us"
os.makedirs(root)
envelope = {"balance": 999999.999972, "performance": {"authTime": "0.001ms", "rateLimitCheckTime": "0.000ms",
            "balanceTime": "0.001ms", "processingTime": "0.002ms", "totalTime": "0.010ms"},
            "rateLimit": {"enabled": False, "perMinute": {"limit": None, "current": None, "approachingLimit": False},
                          "perHour": {"limit": None, "current": None, "approachingLimit": False},
                          "perDay": {"limit": None, "current": None, "approachingLimit": False}}}
for code in us_codes:
    f = first_us[code]
    body = {"city": f[2], "state": f[3], "ST": f[4], "latitude": float(f[9]), "longitude": float(f[10]), **envelope}
    with open(f"{root}/{code}.json", "w") as fh:
        json.dump(body, fh)
def lua(path, bodies, method, target):
    with open(path, "w") as f:
        f.write("local items = {\n")
        for b in bodies:
            f.write("  %s,\n" % json.dumps(b))
        f.write("}\nlocal n = #items\n")
        f.write('wrk.method = "%s"\nwrk.headers["Content-Type"] = "application/json"\n' % method)
        f.write("request = function()\n  local item = items[math.random(n)]\n")
        f.write("  return %s\nend\n" % target)
lua(f"{out}/lookup.lua", [json.dumps({"apiKey": key, "zipcode": c, "country": k}) for k, c in pairs],
    "POST", 'wrk.format(nil, "/api/lookup", nil, item)')
lua(f"{out}/us-post.lua", [json.dumps({"apiKey": key, "zipcode": c}) for c in us_codes],
    "POST", 'wrk.format(nil, "/api/lookup", nil, item)')
lua(f"{out}/us-get.lua", us_codes, "GET", 'wrk.format(nil, "/us/" .. item .. ".json")')
lua(f"{out}/us-get-pub.lua", [f"/api/lookup?zipcode={c}&key={pub_key}" for c in us_codes], "GET",
    'wrk.format(nil, item, {["Origin"] = "https://shop.example"})')
records = [{"postalCode": code, "countryCode": country} for country, code in pairs[:1000]]
with open(f"{out}/bulk.json", "w") as f:
    json.dump({"apiKey": key, "records": records}, f)
points = [{"latitude": float(f[9]), "longitude": float(f[10])} for f in sampled if f[9] and f[10]][:1000]
with open(f"{out}/nearest-bulk.json", "w") as f:
    json.dump({"apiKey": key, "records": points, "limit": 10}, f)
PY

cat >"$OUT/nginx.conf" <<CONF
user root;
worker_processes 2;
daemon off;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { application/json json; }
  server {
    listen 127.0.0.1:$P_NGINX;
    root $OUT/nginx-root;
  }
  server {
    listen 127.0.0.1:$P_NGINX_LOG;
    root $OUT/nginx-root;
    access_log $OUT/nginx-access.log combined buffer=64k flush=1s;
  }
}
CONF
rm -f "$OUT/nginx-access.log"

# A port already served would be benchmarked as ours (and loaded with our requests).
for port in $P_WB $P_BARE $P_NGINX $P_DURABLE $P_BASE $P_NGINX_LOG; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is already in use: choose another PORT" >&2
    exit 1
  fi
done
"${SERVE_ON[@]}" $POSTAL --db "$DB" serve --listen 127.0.0.1:$P_WB >"$OUT/server.log" 2>&1 &
server=$!
"${SERVE_ON[@]}" $POSTAL --db "$DURABLE_DB" serve --durable-charges --listen 127.0.0.1:$P_DURABLE >"$OUT/server-durable.log" 2>&1 &
durable=$!
"${SERVE_ON[@]}" target/release/examples/bare 127.0.0.1:$P_BARE &
bare=$!
"${SERVE_ON[@]}" "$NGINX" -c "$OUT/nginx.conf" -p "$OUT" &
nginx=$!
base=
ports="$P_WB $P_BARE $P_NGINX $P_DURABLE $P_NGINX_LOG"
if [ -n "$BASE" ]; then
  "${SERVE_ON[@]}" "$OUT/postal-$BASE" --db "$BASE_DB" serve --listen 127.0.0.1:$P_BASE >"$OUT/server-base.log" 2>&1 &
  base=$!
  ports="$ports $P_BASE"
fi
trap 'kill $server $durable $bare $nginx $base 2>/dev/null || true' EXIT
for port in $ports; do
  for _ in $(seq 300); do
    curl -s -o /dev/null "http://127.0.0.1:$port/openapi.json" && break
    sleep 0.1
  done
done

# CPU time (user + system, all threads, in clock ticks) of the processes given.
cpu_ticks() {
  local total=0 pid
  for pid in "$@"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}
TICKS_PER_SECOND=$(getconf CLK_TCK)

# Context switches (voluntary: a thread waited, for a request or for another thread;
# nonvoluntary: it was preempted, mostly by wrk on the same cores) of all threads of the
# processes given, from /proc: "voluntary nonvoluntary".
switches() {
  local pid
  for pid in "$@"; do
    cat /proc/"$pid"/task/*/status
  done | awk '/^voluntary_ctxt_switches/ {v += $2} /^nonvoluntary_ctxt_switches/ {n += $2}
    END {print v + 0, n + 0}'
}

# System calls of the servers' threads while wrk runs, counted by perf (a tracepoint's
# counter: nothing is traced or slowed) when this kernel lets perf count it: the steady
# state at full load, beside bench/counts.sh's one request at a time (issue 37).
command -v perf >/dev/null || (apt-get install -y -qq linux-perf >/dev/null 2>&1 || true)
PERF_COUNTS=
if perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
  PERF_COUNTS=1
fi

# -> prints "rps p50_ms p99_ms non2xx cpu_us_per_request syscalls_per_request
#            voluntary_switches_per_request nonvoluntary_switches_per_request"
run_wrk() { # url script server-pids...
  local url=$1 script=$2
  shift 2
  local before after switched count=()
  rm -f "$OUT/perf.txt"
  if [ -n "$PERF_COUNTS" ]; then
    count=(perf stat -x, -o "$OUT/perf.txt" -e raw_syscalls:sys_enter
      -p "$(echo "$@" | tr ' ' ',')" --)
  fi
  before=$(cpu_ticks "$@")
  switched=$(switches "$@")
  "${count[@]}" "${WRK_ON[@]}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency -s "$script" "$url" >"$OUT/wrk.txt"
  after=$(cpu_ticks "$@")
  switched="$switched $(switches "$@")"
  python3 - "$OUT/wrk.txt" "$((after - before))" "$TICKS_PER_SECOND" "$OUT/perf.txt" "$switched" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s+%s\s+([\d.]+)(us|ms|s)\s*$" % re.escape(label), text, re.M)
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
errors = int(non2xx.group(1)) if non2xx else 0
requests = int(re.search(r"(\d+) requests in", text).group(1))
cpu_us = int(sys.argv[2]) / int(sys.argv[3]) / requests * 1e6
calls = float("nan")
if os.path.exists(sys.argv[4]):
    for line in open(sys.argv[4]):
        fields = line.strip().split(",")
        if len(fields) > 2 and fields[0].isdigit() and fields[2] == "raw_syscalls:sys_enter":
            calls = int(fields[0]) / requests
v0, n0, v1, n1 = map(int, sys.argv[5].split())
print(f"{rps:.0f} {ms('50%'):.3f} {ms('99%'):.3f} {errors} {cpu_us:.2f} {calls:.3f}"
      f" {(v1 - v0) / requests:.4f} {(n1 - n0) / requests:.4f}")
PY
}

# Warm-up, then ROUNDS rounds of every server back to back; the machine is shared and
# noisy, so the figures are medians and the ratios medians of the paired ratios.
ROUNDS=${ROUNDS:-3}
for port in $P_WB $P_DURABLE ${BASE:+$P_BASE}; do
  "${WRK_ON[@]}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d2s -s "$OUT/us-post.lua" "http://127.0.0.1:$port" >/dev/null
done
for port in $P_NGINX $P_NGINX_LOG; do
  "${WRK_ON[@]}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d2s -s "$OUT/us-get.lua" http://127.0.0.1:$port >/dev/null
done
# nginx's CPU is its workers' (the master only starts them).
nginx_workers=$(pgrep -P "$nginx" | tr '\n' ' ')
: >"$OUT/rounds.txt"
for round in $(seq "$ROUNDS"); do
  n=$(run_wrk http://127.0.0.1:$P_NGINX "$OUT/us-get.lua" $nginx_workers)
  l=$(run_wrk http://127.0.0.1:$P_NGINX_LOG "$OUT/us-get.lua" $nginx_workers)
  a=$(run_wrk http://127.0.0.1:$P_BARE "$OUT/us-post.lua" $bare)
  w=$(run_wrk http://127.0.0.1:$P_WB "$OUT/us-post.lua" $server)
  d=$(run_wrk http://127.0.0.1:$P_DURABLE "$OUT/us-post.lua" $durable)
  m=$(run_wrk http://127.0.0.1:$P_WB "$OUT/lookup.lua" $server)
  g=$(run_wrk http://127.0.0.1:$P_WB "$OUT/us-get-pub.lua" $server)
  p=
  [ -n "$BASE" ] && p=$(run_wrk http://127.0.0.1:$P_BASE "$OUT/us-post.lua" $base)
  echo "$n $l $a $w $d $m $g $p" >>"$OUT/rounds.txt"
  echo "round $round: nginx $n | nginx+log $l | bare $a | write-behind $w | durable $d | mixed $m | GET pub $g${p:+ | $BASE $p} (rps p50 p99 non-2xx cpu-us/req calls/req voluntary/req nonvoluntary/req)"
done

# (c): bulk requests one after the other on one keep-alive connection, without and with
# gzip: median totalTime, bytes on the wire per answer, server CPU per request.
bulk_rows=$(python3 - "$server" "${BULK_REQUESTS:-300}" "$OUT" "$TICKS_PER_SECOND" "$P_WB" <<'PY'
import gzip, json, socket, statistics, sys
pid, n, out, ticks_per_second, port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
def cpu_ticks():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15)
def run(path, body, encoding):
    conn = socket.create_connection(("127.0.0.1", int(port)))
    stream = conn.makefile("rb")
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n" + (f"Accept-Encoding: {encoding}\r\n" if encoding else "")
            + "\r\n").encode()
    times, wire, before = [], [], cpu_ticks()
    for _ in range(n):
        conn.sendall(head + body)
        size, length, gzipped = 0, 0, False
        status = stream.readline()
        assert b" 200 " in status, status
        size += len(status)
        while True:
            line = stream.readline()
            size += len(line)
            if line == b"\r\n":
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            if name.lower() == "content-encoding":
                gzipped = value.strip() == "gzip"
        answer = stream.read(length)
        wire.append(size + length)
        text = gzip.decompress(answer) if gzipped else answer
        times.append(float(json.loads(text)["performance"]["totalTime"][:-2]))
    cpu_ms = (cpu_ticks() - before) / ticks_per_second / n * 1e3
    conn.close()
    assert gzipped == bool(encoding), (path, encoding, gzipped)
    return f"{statistics.median(times):.3f} {statistics.median(wire):.0f} {cpu_ms:.2f}"
for name, path, file in [("validate-bulk", "/api/validate-bulk", "bulk.json"),
                         ("nearest-bulk", "/api/nearest-bulk", "nearest-bulk.json")]:
    body = open(f"{out}/{file}", "rb").read()
    for encoding in ["", "gzip"]:
        print(name, encoding or "identity", run(path, body, encoding))
PY
)

slow() { grep -c "slow billing flush" "$1" || true; }
python3 - "$OUT/rounds.txt" "$CONNECTIONS" "$SECONDS_PER_RUN" "$bulk_rows" "$BASE" \
  "$(slow "$OUT/server.log")" "$(slow "$OUT/server-durable.log")" "${BULK_REQUESTS:-300}" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
names = ["(n) nginx, file per code", "(l) nginx, + access log", "(a) bare poem handler",
         "(w) postal write-behind", "(d) postal durable", "(m) postal w-b, all countries",
         "(g) postal w-b, GET pub+Origin"]
if sys.argv[5]:
    names.append(f"(p) postal w-b at {sys.argv[5][:9]}")
import os
how = "servers on core 0, wrk -t1 on core 1" if os.environ.get("PIN") else "wrk -t2 on the same 2 cores"
print(f"connections: {sys.argv[2]}, {sys.argv[3]} s per run, {len(rows)} rounds, {how}; medians:")
W = 8  # fields a server a round (run_wrk's)
for i, name in enumerate(names):
    col = lambda k: [r[W * i + k] for r in rows]
    ratio = lambda j: statistics.median(r[W * i] / r[W * j] for r in rows)
    # CPU per request against the bare handler's (a, column 2), median of the paired rounds.
    cpu_ratio = statistics.median(r[W * i + 4] / r[W * 2 + 4] for r in rows)
    print(f"{name:30}: {statistics.median(col(0)):8.0f} req/s  p50 {statistics.median(col(1)):6.3f} ms"
          f"  p99 {statistics.median(col(2)):6.3f} ms (worst round {max(col(2)):7.3f})"
          f"  non-2xx {sum(col(3)):.0f}  x nginx {ratio(0):.2f}  x nginx+log {ratio(1):.2f}"
          f"  server CPU {statistics.median(col(4)):5.2f} us/req = {cpu_ratio:.2f}x bare"
          f"  system calls {statistics.median(col(5)):.2f}/req"
          f" = {statistics.median(r[W * i + 5] / r[W * 2 + 5] for r in rows):.2f}x bare, context switches"
          f" {statistics.median(col(6)):.4f} voluntary + {statistics.median(col(7)):.4f}/req")
for row in sys.argv[4].splitlines():
    name, encoding, total, wire, cpu = row.split()
    label = "1,000 records" if name == "validate-bulk" else "1,000 points x 10"
    print(f"(c) {name} {label}, {encoding:8}: median server totalTime {total} ms, {int(wire):9,} bytes"
          f" on the wire, server CPU {cpu} ms/request ({sys.argv[8]} requests)")
print(f"billing flushes of 100 ms or more (warm-ups included): write-behind server (w, m, c)"
      f" {sys.argv[6]}, durable server (d) {sys.argv[7]}")
PY
