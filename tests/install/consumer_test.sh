#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds examples/consumer against the installed
# package twice, with find_package(Ingot) and with pkg-config, then runs both on an ONNX model.
#   consumer_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
model=/usr/share/libonnx-testdata/data/node/test_add/model.onnx

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
# Only the public API is installed: no internal header travels.
if find "$tmp/prefix/include" -name '*.h' | grep -v '/include/ingot/' | grep -q .; then
  echo "FAIL: headers outside include/ingot were installed"; exit 1
fi

echo "== find_package(Ingot)"
cmake -S "$src/examples/consumer" -B "$tmp/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/cmake-build" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/cmake-build/consumer" "$model"

echo "== pkg-config"
libdir="$(cd "$(dirname "$(find "$tmp/prefix" -name 'ingot.pc' | head -n1)")/.." && pwd)"
flags="$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs ingot)"
echo "pkg-config --cflags --libs ingot: $flags"
# shellcheck disable=SC2086  # the flags are words on purpose
g++ "$src/examples/consumer/main.cpp" $flags -Wl,-rpath,"$libdir" -o "$tmp/consumer-pc"
"$tmp/consumer-pc" "$model"

# Only the public API is exported from libingot.so: internal namespaces stay hidden.
lib="$(find "$tmp/prefix" -name 'libingot.so' | head -n1)"
exported="$(nm -DC --defined-only "$lib" | grep -c ' ingot::' || true)"
internal="$(nm -DC --defined-only "$lib" | awk '$3 ~ /^ingot::(cpu|cuda|passes|sem|fused|flags|cli|tuning)::/' | head -n5)"
echo "libingot.so exports $exported ingot:: symbols"
[[ -z "$internal" ]] || { echo "FAIL: internal symbols exported:"; echo "$internal"; exit 1; }
echo "PASS"
