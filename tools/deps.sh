#!/bin/sh
# Install what qhost needs on Debian 12, and only what is missing.
#   tools/deps.sh           build dependencies
#   tools/deps.sh --tests   also the test oracles: PyTorch, torchvision, onnx, scikit-learn
#                           (Debian packages) and ONNX Runtime (npm, into tests/ort), and
#                           what the Python package's install test needs (venv, setuptools,
#                           wheel: python/README.md's install command)
# Runs as root (CI) or through sudo. Node.js/npm may come from outside Debian: they are
# installed from apt only when missing, since apt refuses to replace them.
set -eu
cd "$(dirname "$0")/.."

want_tests=0
[ "${1:-}" = "--tests" ] && want_tests=1

build_pkgs="build-essential cmake pkg-config libglib2.0-dev libjson-glib-dev libprotobuf-c-dev
  protobuf-c-compiler libonnx-dev libopenblas-serial-dev libzip-dev libdnnl-dev
  libxnnpack-dev libpthreadpool-dev"
test_pkgs="python3 python3-numpy python3-torch python3-torchvision python3-onnx python3-sklearn
  python3-venv python3-setuptools python3-wheel"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

missing=""
pkgs="$build_pkgs"
[ $want_tests = 1 ] && pkgs="$pkgs $test_pkgs"
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ $want_tests = 1 ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  missing="$missing nodejs npm"
fi
if [ -n "$missing" ]; then
  echo "deps: installing:$missing"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # shellcheck disable=SC2086
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

if [ $want_tests = 1 ] && [ ! -d tests/ort/node_modules/onnxruntime-node ]; then
  echo "deps: installing onnxruntime-node into tests/ort"
  # The package ships its Linux binary; its install script would try to download more.
  (cd tests/ort && npm install --ignore-scripts --no-audit --no-fund)
fi
exit 0
