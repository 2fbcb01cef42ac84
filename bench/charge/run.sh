#!/bin/sh
# Charging benchmark (release build): in-memory charges on 1 account, then on 1,000
# accounts, write-behind and durable; flush cost; the CLI announcement cost.
# Usage: bench/charge/run.sh [--seconds S] [--threads N] [--dir DIR]
set -eu
cd "$(dirname "$0")/../.."
exec cargo run --quiet --release --example charge-bench -- "$@"
