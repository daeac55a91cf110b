#!/usr/bin/env bash
# BRAID_BACKEND as whole programs see it (tests/unit/fallback/CMakeLists.txt builds them):
#   forwarding_test.sh PROBE PROBE_REAL DLOPEN_PLAIN LIBBRAID REAL_LIBNCCL
# 1. PROBE (linked to braid) under BRAID_BACKEND=braid and =nccl: braid's bootstrap serves the
#    first, the real NCCL's (its own INFO lines) the second; the real NCCL's last error comes
#    back through braid; a bad BRAID_BACKEND fails every call with ncclInvalidUsage naming it;
#    BRAID_NCCL_LIBRARY pointing at braid itself is refused, saying so.
# 2. PROBE_REAL (linked to the real NCCL) with LD_PRELOAD=LIBBRAID and BRAID_BACKEND=nccl,
#    under LD_DEBUG=bindings: the real NCCL, loaded by braid, binds none of its own names to
#    braid. The control DLOPEN_PLAIN (the real NCCL dlopened without RTLD_DEEPBIND) shows that
#    such bindings exist otherwise, so this check can fail.
set -u
probe=$1 probe_real=$2 plain=$3 braid=$4 real=$5
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0
failures=0
check() {  # DESCRIPTION FILE REGEX [absent]
  if [ "${4:-}" = absent ]; then
    grep -qE "$3" "$2" && { echo "FAIL: $1: found /$3/"; sed 's/^/  | /' "$2"; failures=$((failures + 1)); return; }
  else
    grep -qE "$3" "$2" || { echo "FAIL: $1: no /$3/"; sed 's/^/  | /' "$2"; failures=$((failures + 1)); return; }
  fi
  echo "ok: $1"
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

BRAID_BACKEND=braid timeout 60 "$probe" > "$work/braid" 2>&1
check "braid: braid's bootstrap" "$work/braid" "bootstrap root listening"
check "braid: a 1-rank init" "$work/braid" "^init rc=0 "
check "braid: not the real NCCL" "$work/braid" "Bootstrap: Using" absent

BRAID_BACKEND=nccl timeout 60 "$probe" > "$work/nccl" 2>&1
check "nccl: the decision logged" "$work/nccl" "BRAID_BACKEND=nccl: every call goes to the real NCCL 2\.[0-9.]+ from /"
check "nccl: the real NCCL's bootstrap" "$work/nccl" "Bootstrap: Using"
check "nccl: not braid's bootstrap" "$work/nccl" "bootstrap root listening" absent
check "nccl: version" "$work/nccl" "^version rc=0 code=2[0-9]{4}$"
if grep -q "^init rc=0 " "$work/nccl"; then
  echo "ok: nccl: init (a GPU is here)"
else  # no GPU: the real NCCL's own failure, through braid's exports
  check "nccl: the real NCCL's error" "$work/nccl" "^init rc=1 last=\[Cuda failure"
  check "nccl: the failing library named" "$work/nccl" "WARN BRAID_BACKEND=nccl: ncclCommInitRank in the real NCCL \(/.*libnccl\.so[.0-9]*\) returned 1: Cuda failure"
fi

BRAID_BACKEND=bogus timeout 60 "$probe" > "$work/bogus" 2>&1
check "bogus: ncclInvalidUsage naming it" "$work/bogus" "^uniqueid rc=5 last=\[BRAID_BACKEND='bogus' is not one of auto, braid, nccl"

BRAID_BACKEND=nccl BRAID_NCCL_LIBRARY="$braid" timeout 60 "$probe" > "$work/self" 2>&1
check "self: braid refused" "$work/self" "^uniqueid rc=2 last=\[BRAID_BACKEND=nccl, but no usable real NCCL: .*: it is braid itself"

# 2. Bindings under LD_PRELOAD (every PLT slot resolved at load: LD_BIND_NOW).
real_dir=$(dirname "$(readlink -f "$real")")
LD_LIBRARY_PATH="$real_dir" LD_PRELOAD="$braid" BRAID_BACKEND=nccl LD_BIND_NOW=1 LD_DEBUG=bindings \
  LD_DEBUG_OUTPUT="$work/bind" timeout 60 "$probe_real" > "$work/preload" 2>&1
check "preload: the real NCCL serves" "$work/preload" "Bootstrap: Using"
cat "$work"/bind.* > "$work/bindings" 2>/dev/null
check "preload: the real NCCL binds its own names to itself" "$work/bindings" "libnccl\.so\.2 \[0\] to .*libnccl\.so\.2 \[0\]: normal symbol \`p?nccl"
check "preload: none of them to braid" "$work/bindings" "libnccl\.so\.2 \[0\] to .*libbraid\.so \[0\]: normal symbol \`p?nccl" absent
rm -f "$work"/bind.*
LD_PRELOAD="$braid" LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/bind" timeout 60 "$plain" "$real" > /dev/null 2>&1
cat "$work"/bind.* > "$work/control" 2>/dev/null
check "control: without RTLD_DEEPBIND the real NCCL binds to braid" "$work/control" "libnccl\.so\.2 \[0\] to .*libbraid\.so \[0\]: normal symbol \`nccl"

[ "$failures" -eq 0 ] && { echo "PASS"; exit 0; }
echo "$failures failure(s)"
exit 1
