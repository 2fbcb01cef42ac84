#!/usr/bin/env bash
# Import benchmark: release build, then ../shared/geonames/allCountries.zip imported three
# times into one database in a temporary directory (run 1 into a fresh file, runs 2 and 3
# re-import over it, which is what a refresh in production does). Prints each run's
# seconds, the median, rows per second and the database size.
# POSTAL_IMPORT_TIMINGS=1 bench/import.sh adds the time of each phase of every run (stderr).
set -euo pipefail

cd "$(dirname "$0")/.."
source_zip=../shared/geonames/allCountries.zip
[[ -f $source_zip ]] || { echo "bench: $source_zip not found" >&2; exit 1; }

cargo build --release --bin postal-import
import=target/release/postal-import

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/postal.db

echo "source: $source_zip"
echo "machine: $(nproc) cores, $(uname -sr)"
times=()
rows=0
for run in 1 2 3; do
    if [[ $run == 1 ]]; then kind="fresh database"; else kind="re-import over the previous data"; fi
    start=$(date +%s.%N)
    summary=$("$import" --db "$db" "$source_zip")
    end=$(date +%s.%N)
    seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    times+=("$seconds")
    rows=$(awk '{ print $2 }' <<<"$summary")
    echo "run $run ($kind): ${seconds} s wall  [$summary]"
done

median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p)
size_bytes=$(stat -c %s "$db")
wal_bytes=$( [[ -f $db-wal ]] && stat -c %s "$db-wal" || echo 0)
echo "median: ${median} s"
awk -v r="$rows" -v m="$median" 'BEGIN { printf "rows per second: %.0f (%d rows / %s s)\n", r / m, r, m }'
awk -v s="$size_bytes" -v w="$wal_bytes" \
    'BEGIN { printf "database size: %.1f MB (%d bytes; WAL left: %d bytes)\n", s / 1e6, s, w }'
