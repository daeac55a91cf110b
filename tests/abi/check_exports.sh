#!/usr/bin/env bash
# Checks that libbraid.so exports exactly what NVIDIA's libnccl.so.2 exports, the same way.
#
#   check_exports.sh <libbraid.so> <reference libnccl.so.2>
#
# 1. The defined dynamic symbols named nccl*/pnccl*, with their nm type, equal the reference's
#    (2.28.9: 52 API names as W, their pncclX as T, and ncclResetDebugInitInternal as T).
# 2. Every weak ncclX has a strong pncclX at the same address (an alias, not a copy).
# 3. Nothing else is defined: no C++, CUDA runtime or other internal symbols. Allowed
#    exceptions: none (the linker adds no defined dynamic symbol under an export list with
#    `local: *`). A symbol braid must export can only be added to ALLOWED_EXTRA with a reason.
# 4. No symbol versions: no name@VERSION among defined symbols, no .gnu.version_d section.
# 5. SONAME is libnccl.so.2, a libnccl.so.2 beside the library resolves to it, and it does not
#    depend on any libnccl (so a call can never reach the real NCCL by accident).
# Exit status: 0 pass, 1 fail, 77 skipped (tool or reference missing).
set -u

# braidVersion: the marker src/fallback uses to refuse braid when it looks for the real NCCL.
ALLOWED_EXTRA='braidVersion'  # an extended regex of extra symbol names

lib=${1:?usage: check_exports.sh <libbraid.so> <reference libnccl.so.2>}
ref=${2:?usage: check_exports.sh <libbraid.so> <reference libnccl.so.2>}

for tool in nm readelf c++filt comm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
[ -r "$ref" ] || { echo "SKIP: reference library $ref not readable"; exit 77; }
[ -r "$lib" ] || { echo "FAIL: $lib not found (build the braid target)"; exit 1; }

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "TYPE NAME" for each defined dynamic symbol (nm appends @VERSION to versioned names).
nm -D --defined-only "$lib" | awk 'NF == 3 { print $2, $3 }' | sort -u > "$work/braid.all"
nm -D --defined-only "$ref" | awk 'NF == 3 { print $2, $3 }' | sort -u > "$work/ref.all"
grep -E ' p?nccl[A-Za-z0-9_]*$' "$work/ref.all" > "$work/ref.nccl"
grep -E ' p?nccl[A-Za-z0-9_]*$' "$work/braid.all" > "$work/braid.nccl"

expected=$(wc -l < "$work/ref.nccl")
actual=$(wc -l < "$work/braid.nccl")
echo "reference: $expected nccl*/pnccl* symbols in $ref"
echo "braid:     $actual nccl*/pnccl* symbols, $(wc -l < "$work/braid.all") defined in all, in $lib"
[ "$expected" -ge 100 ] || fail "the reference exports only $expected nccl symbols: is $ref NCCL 2.28?"

# 1. Same names with the same types.
comm -23 "$work/ref.nccl" "$work/braid.nccl" > "$work/missing"
comm -13 "$work/ref.nccl" "$work/braid.nccl" > "$work/extra"
if [ -s "$work/missing" ]; then
  fail "$(wc -l < "$work/missing") symbols of the reference are missing or have another type in braid:"
  sed 's/^/    /' "$work/missing"
fi
if [ -s "$work/extra" ]; then
  fail "$(wc -l < "$work/extra") nccl symbols braid exports that the reference does not (or with another type):"
  sed 's/^/    /' "$work/extra"
fi
# The rule behind the reference, spelled out for a clearer message.
awk '$2 ~ /^pnccl/ && $1 != "T" { print "    " $0 }' "$work/braid.nccl" > "$work/bad_strong"
[ -s "$work/bad_strong" ] && { fail "pnccl* symbols must be strong (T):"; cat "$work/bad_strong"; }

# 2. Each weak ncclX is an alias of pncclX.
nm -D --defined-only "$lib" | awk 'NF == 3 { print $3, $1 }' | sort > "$work/addresses"
while read -r type name; do
  [ "$type" = W ] || continue
  weak_address=$(awk -v n="$name" '$1 == n { print $2 }' "$work/addresses")
  strong_address=$(awk -v n="p$name" '$1 == n { print $2 }' "$work/addresses")
  if [ -z "$strong_address" ]; then
    fail "weak $name has no p$name"
  elif [ "$weak_address" != "$strong_address" ]; then
    fail "$name ($weak_address) is not an alias of p$name ($strong_address)"
  fi
done < "$work/braid.nccl"

# 3. Nothing but nccl*/pnccl*.
grep -vE ' p?nccl[A-Za-z0-9_]*$' "$work/braid.all" > "$work/others"
if [ -n "$ALLOWED_EXTRA" ]; then
  grep -vE " ($ALLOWED_EXTRA)\$" "$work/others" > "$work/others.left"
  mv "$work/others.left" "$work/others"
fi
if [ -s "$work/others" ]; then
  fail "$(wc -l < "$work/others") defined dynamic symbols other than nccl*/pnccl* (first 40, demangled):"
  head -n 40 "$work/others" | c++filt | sed 's/^/    /'
fi

# 4. No symbol versions on defined symbols (undefined ones such as memcpy@GLIBC_2.14 are fine).
readelf --dyn-syms -W "$lib" | awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 ~ /@/ { print "    " $8 }' > "$work/versioned"
[ -s "$work/versioned" ] && { fail "versioned symbols:"; head -n 20 "$work/versioned"; }
if readelf -V -W "$lib" | grep -q "Version definition section"; then
  fail "$lib has a version definition section (.gnu.version_d); NCCL's symbols are unversioned"
fi

# 5. SONAME, the libnccl.so.2 link, and no dependency on a real libnccl.
soname=$(readelf -d -W "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = libnccl.so.2 ] || fail "SONAME is '$soname', expected libnccl.so.2"
link="$(dirname "$lib")/libnccl.so.2"
if [ ! -e "$link" ]; then
  fail "$link does not exist"
elif [ "$(readlink -f "$link")" != "$(readlink -f "$lib")" ]; then
  fail "$link resolves to $(readlink -f "$link"), not to $lib"
fi
needed=$(readelf -d -W "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
echo "$needed" | grep -q '^libnccl' && fail "$lib depends on $(echo "$needed" | grep '^libnccl' | tr '\n' ' ')"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: $actual symbols match the reference; nothing else exported; unversioned; SONAME libnccl.so.2"
