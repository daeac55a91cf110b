#!/usr/bin/env bash
# Checks that braid's nccl.h declares every name NVIDIA's does, and no other, in C and C++:
#  - macros starting with NCCL/nccl (from `-dM -E`: names only; values are compared by the
#    abi.HeaderAbi tests);
#  - identifiers starting with nccl/pnccl in the preprocessed header (functions, types,
#    struct tags, enumerators).
# It catches a declaration that the row-by-row test was never told about.
#
#   check_header_names.sh <c++ compiler> <braid include dir> <reference include dir>
#
# The reference dir also provides cuda_runtime.h for both. Exit: 0 pass, 1 fail, 77 skipped.
set -u
cxx=${1:?usage: check_header_names.sh <c++ compiler> <braid include dir> <reference include dir>}
braid_include=${2:?}
reference_include=${3:?}
[ -r "$reference_include/nccl.h" ] || { echo "SKIP: no $reference_include/nccl.h"; exit 77; }

failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# preprocess <lang> <output> <include dirs...>
preprocess() {
  local lang=$1 out=$2
  shift 2
  local flags=()
  for dir in "$@"; do flags+=("-I$dir"); done
  printf '#include <nccl.h>\n' | "$cxx" -x "$lang" -E "${flags[@]}" - > "$out.i" || return 1
  printf '#include <nccl.h>\n' | "$cxx" -x "$lang" -dM -E "${flags[@]}" - > "$out.macros" || return 1
  grep -E '^#define (NCCL|nccl)' "$out.macros" | awk '{ sub(/\(.*/, "", $2); print $2 }' | sort -u > "$out.macro_names"
  grep -v '^#' "$out.i" | grep -oE '\<p?nccl[A-Za-z0-9_]*' | sort -u > "$out.identifiers"
}

for lang in c c++; do
  preprocess "$lang" "$work/braid.$lang" "$braid_include" "$reference_include" || { echo "FAIL: $lang preprocessing"; exit 1; }
  preprocess "$lang" "$work/ref.$lang" "$reference_include" || { echo "FAIL: $lang preprocessing"; exit 1; }
  # The braid run must really have read braid's header (it comes first on the path).
  if ! grep -qF "\"$braid_include/nccl.h\"" "$work/braid.$lang.i"; then
    echo "FAIL: $lang: preprocessing did not read $braid_include/nccl.h"
    failures=$((failures + 1))
  fi
  for kind in macro_names identifiers; do
    count=$(wc -l < "$work/ref.$lang.$kind")
    if [ "$count" -lt 10 ]; then
      echo "FAIL: $lang: the reference header has only $count $kind"
      failures=$((failures + 1))
    fi
    if ! diff_out=$(diff "$work/ref.$lang.$kind" "$work/braid.$lang.$kind"); then
      echo "FAIL: $lang: $kind differ (< only NVIDIA's header, > only braid's):"
      echo "$diff_out" | grep '^[<>]' | sed 's/^/    /'
      failures=$((failures + 1))
    else
      echo "ok: $lang: $count $kind identical"
    fi
  done
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS"
