#!/bin/sh
# The main job: install what is missing, build qhost, and run it on the bundled
# example model (a digits CNN): inspect it, run the float model on the test set with
# the host's kernels and print predictions and accuracy, then quantize it for the
# fbgemm and qnnpack backends and print the int8 accuracy of each.
set -eu
cd "$(dirname "$0")/.."
sh tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
echo
echo "== qhost inspect examples/digits_cnn.onnx"
./build/qhost inspect examples/digits_cnn.onnx
echo
echo "== qhost run (fp32, host reference kernels) on $(basename examples/digits_test.npy)"
./build/qhost run examples/digits_cnn.onnx --input examples/digits_test.npy \
  --labels examples/digits_labels.npy -o build/digits_logits.npy
echo "logits written to build/digits_logits.npy"
for backend in fbgemm qnnpack; do
  echo
  echo "== qhost quantize --backend $backend (calibration: $(basename examples/digits_calib.npy))"
  ./build/qhost quantize --backend "$backend" --calib examples/digits_calib.npy \
    -o "build/digits_$backend.qdq.onnx" examples/digits_cnn.onnx
  echo
  echo "== qhost run (int8 QDQ for $backend, host reference kernels)"
  ./build/qhost run "build/digits_$backend.qdq.onnx" --input examples/digits_test.npy \
    --labels examples/digits_labels.npy -o "build/digits_${backend}_logits.npy" | tail -n 1
done
