#!/bin/sh
# The whole test suite: install what is missing (with the test oracles), then build
# and run ctest twice: a release build with warnings as errors, and an
# AddressSanitizer + UndefinedBehaviorSanitizer build (which skips the tests
# labelled "heavy": full-size models that would take too long under ASan). Testing and
# the tests' Python are asked for explicitly: tools/demo.sh configures the same build
# directory without them. Each run ends with tests/summary.py's line "LABEL: N passed, N
# failed, N skipped", the skipped tests listed with their reasons.
set -eu
cd "$(dirname "$0")/.."
sh tools/deps.sh --tests
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHOST_WERROR=ON -DBUILD_TESTING=ON -DQH_PYTHON=/usr/bin/python3
cmake --build build -j"$jobs"
status=0
ctest --test-dir build --output-on-failure --no-tests=error -j"$jobs" --output-junit junit.xml || status=$?
/usr/bin/python3 tests/summary.py build/junit.xml --build build --label plain
[ "$status" = 0 ] || exit "$status"

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DQHOST_WERROR=ON -DQHOST_SANITIZE=ON -DBUILD_TESTING=ON -DQH_PYTHON=/usr/bin/python3
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j"$jobs" -LE heavy \
  --output-junit junit.xml || status=$?
/usr/bin/python3 tests/summary.py build-asan/junit.xml --build build-asan --label asan
exit "$status"
