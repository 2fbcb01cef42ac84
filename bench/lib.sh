# Shell functions the benchmarks share; source it from the repository root.

# base_commit REF: the full commit id of REF (a branch or HEAD~1 moves; the id does not).
base_commit() {
  git rev-parse --verify "$1^{commit}"
}

# build_base COMMIT DIR: the `postal` and `postal-import` binaries of COMMIT (a full id,
# see base_commit), built once into DIR/postal-COMMIT and DIR/postal-import-COMMIT, in a target dir of its own (DIR/base-target, kept for the
# next base): in this tree's target dir cargo took this version's `postal` library,
# newer than the archive's files, for the base's, and the base did not compile.
build_base() {
  local commit=$1 dir=$2
  [ -x "$dir/postal-$commit" ] && [ -x "$dir/postal-import-$commit" ] && return
  rm -rf "$dir/base-src"
  mkdir -p "$dir/base-src"
  git archive "$commit" | tar -x -C "$dir/base-src"
  cargo build --release --quiet --bin postal --bin postal-import \
    --manifest-path "$dir/base-src/Cargo.toml" --target-dir "$dir/base-target"
  cp "$dir/base-target/release/postal" "$dir/postal-$commit"
  cp "$dir/base-target/release/postal-import" "$dir/postal-import-$commit"
}

# this_postal [cargo target flags...]: builds this version's `postal` (and the targets
# given) and prints its path as cargo reports it. Both versions' binaries are named
# target/release/postal, so a stale copy of the other can never be benchmarked as this one.
this_postal() {
  cargo build --release --quiet --bin postal "$@" --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "postal" and m.get("executable"):
        print(m["executable"])'
}
