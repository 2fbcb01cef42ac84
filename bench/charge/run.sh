#!/bin/sh
# Charging benchmark (release build): 64 concurrent callers on 1 account, then on 1,000
# accounts; prints charges/s, the p50/p99 wait and commits/s with the mean batch size.
# Usage: bench/charge/run.sh [--seconds S] [--callers N] [--dir DIR]
set -eu
cd "$(dirname "$0")/../.."
exec cargo run --quiet --release --example charge-bench -- "$@"
