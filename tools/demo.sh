#!/bin/sh
# The main job: install what is missing, build qhost, and run it on the bundled
# example model (a digits CNN) with the default backend, x86: inspect it, run the
# float model on the test set (predictions and accuracy), quantize it for x86, run
# the int8 model on x86's oneDNN kernels (int8 accuracy), and time int8 against fp32
# in one `qhost bench`. Then the fbgemm and qnnpack QDQ models on their own backends'
# kernels (FBGEMM-style code, XNNPACK), for comparison.
#   sh tools/demo.sh [CMAKE_ARGS...]
set -eu
cd "$(dirname "$0")/.."
sh tools/deps.sh
# The main job needs no test: BUILD_TESTING=OFF keeps CMake from listing the Python
# test cases, so this works on a machine that never ran tools/test.sh. Arguments are
# passed on to CMake (.ci/run adds -DQH_PYTHON=/nonexistent to prove no step needs Python).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF "$@"
cmake --build build -j"$(nproc)"
model=examples/digits_cnn.onnx
data="--input examples/digits_test.npy --labels examples/digits_labels.npy"
echo
echo "== qhost inspect $model"
./build/qhost inspect "$model"
echo
echo "== qhost run (fp32, host reference kernels) on $(basename examples/digits_test.npy)"
# shellcheck disable=SC2086
./build/qhost run "$model" $data -o build/digits_logits.npy
echo "logits written to build/digits_logits.npy"
echo
echo "== qhost quantize --backend x86 (calibration: $(basename examples/digits_calib.npy))"
./build/qhost quantize --backend x86 --calib examples/digits_calib.npy \
  -o build/digits_x86.qdq.onnx "$model"
echo
echo "== qhost run --backend x86 (int8, oneDNN kernels)"
# shellcheck disable=SC2086
./build/qhost run build/digits_x86.qdq.onnx --backend x86 $data \
  -o build/digits_x86_logits.npy | tail -n 1
echo
echo "== qhost bench --backend x86 (int8 vs the fp32 model, timed in the same run)"
./build/qhost bench build/digits_x86.qdq.onnx --backend x86 --input examples/digits_test.npy \
  --runs 20
for backend in fbgemm qnnpack; do
  echo
  echo "== qhost quantize --backend $backend, then run it on $backend's own int8 kernels"
  ./build/qhost quantize --backend "$backend" --calib examples/digits_calib.npy --quiet \
    -o "build/digits_$backend.qdq.onnx" "$model"
  # shellcheck disable=SC2086
  ./build/qhost run "build/digits_$backend.qdq.onnx" --backend "$backend" $data \
    -o "build/digits_${backend}_logits.npy" | tail -n 1
done
