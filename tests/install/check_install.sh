#!/usr/bin/env bash
# Installs braid into a scratch prefix and builds the example against it twice: through the
# CMake package (find_package(braid)) and through pkg-config (braid.pc). Runs both.
set -euo pipefail
build=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/allreduce" -B "$work/cm" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cm" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/cm/allreduce"
lib=$(ls -d "$work"/prefix/lib*/pkgconfig | head -1)
cc "$src/examples/allreduce/allreduce.c" -o "$work/pc" $(PKG_CONFIG_PATH="$lib" pkg-config --cflags --libs braid)
LD_LIBRARY_PATH="$(dirname "$lib")" "$work/pc"
# The drop-in name: a program linked against libnccl.so.2 runs on braid's.
test -e "$(dirname "$lib")/libnccl.so.2"
echo "install OK"
