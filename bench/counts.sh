#!/usr/bin/env bash
# Instructions, system calls and context switches per request (issue 37): figures that do
# not depend on the machine's mood, for the bare poem handler (bench/bare.rs) and postal's
# billed POST lookup, GET lookup with a publishable key and its Origin, validate-bulk of
# 1,000, a city query and a nearest query (bench/counts.py says how each is counted). On
# the sample dataset (callgrind runs the server about 50x slower; the full one would take
# minutes to load). Installs valgrind and strace when missing.
# Usage: [N=2000] [ONLY=bare,validate-bulk] bench/counts.sh  (ONLY: the rows whose names
# start so; all by default)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out/counts
N=${N:-2000}
source bench/lib.sh
for tool in valgrind strace; do
  command -v "$tool" >/dev/null || apt-get install -y -q "$tool" >/dev/null
done
POSTAL=$(this_postal --bin postal-import --example bare)
rm -rf "$OUT"
mkdir -p "$OUT"
DB=$OUT/counts.db
target/release/postal-import --db "$DB" ../shared/geonames/sample.zip >/dev/null 2>&1
account=$($POSTAL --db "$DB" account create --name counts)
account_id=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
api_key=$(echo "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
$POSTAL --db "$DB" account topup "$account_id" --usd 100000 >/dev/null
pub_key=$($POSTAL --db "$DB" key create "$account_id" --publishable --origin https://shop.example \
  --per-ip-minute 2000000000 | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
echo "postal $(git rev-parse --short HEAD), N=$N, $(valgrind --version), $(strace -V | head -1)"
python3 bench/counts.py --postal "$POSTAL" --bare target/release/examples/bare --db "$DB" \
  --key "$api_key" --pub "$pub_key" --n "$N" --out "$OUT" --only "${ONLY:-}"
