#!/usr/bin/env bash
# Int8 packages against float32 packages and onnxruntime-node on the same QDQ model, on this CPU, at 1
# and 2 threads, side by side in one run (docs/QUANTIZATION.md). Needs the model cache
# (scripts/fetch-models.sh, which also holds onnxruntime-node), node and /usr/bin/python3 with numpy and
# skimage.
#
#   bash bench/int8.sh [build/tools/ingot/ingot] > table.md
set -euo pipefail
ingot="${1:-build/tools/ingot/ingot}"
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/tests/quant/make_calibration.py" "$work/calib"
# A MatMul-heavy model for dynamic quantization (bench/make_mlp.py), its input as a one-file "set".
mkdir -p "$work/models" "$work/calib/mlp"
/usr/bin/python3 "$here/bench/make_mlp.py" "$work/models/mlp_b64.onnx" "$work/calib/mlp/000.npy" 64
cache_models=("$cache" "$work/models")
median() { "$ingot" bench "$1" --threads "$2" --iterations "${3:-100}" 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'; }
echo "| model (static unless marked) | threads | float32 package | int8 package | speed-up | onnxruntime-node, same QDQ model | int8 / onnxruntime |"
echo "|---|---|---|---|---|---|---|"
while read -r name file calib shape method; do
  model="$(find "${cache_models[@]}" -name "$file" | head -1)"
  [ -n "$model" ] || continue
  shape_opt=()
  [ "$shape" = "-" ] || shape_opt=(--input-shape "$shape")
  "$ingot" convert "$model" -o "$work/$name.fp32.ingot" "${shape_opt[@]}" -q >/dev/null
  if [ "$method" = dynamic ]; then
    "$ingot" convert "$model" -o "$work/$name.int8.ingot" "${shape_opt[@]}" --precision int8 --dynamic -q >/dev/null
  else
    "$ingot" convert "$model" -o "$work/$name.int8.ingot" "${shape_opt[@]}" --precision int8 \
        --calib "$work/calib/$calib" --calib-method "$method" -q >/dev/null
  fi
  if [ "$method" = dynamic ]; then
    quant_opt=(--dynamic)
  else
    quant_opt=(--calib "$work/calib/$calib" --calib-method "$method")
  fi
  "$ingot" quantize "$model" -o "$work/$name.qdq.onnx" "${shape_opt[@]}" "${quant_opt[@]}" -q >/dev/null
  for t in 1 2; do
    f=$(median "$work/$name.fp32.ingot" $t)
    q=$(median "$work/$name.int8.ingot" $t)
    o=$(NODE_PATH="$cache/node_modules" node "$here/tests/quant/onnxruntime_qdq.js" "$work/$name.qdq.onnx" \
        "$work/calib/$calib/000.npy" "$work/ort" 100 $t 2>/dev/null | sed -n 's/.*"median_ms":\([0-9.]*\).*/\1/p')
    awk -v n="$name" -v t=$t -v f="$f" -v q="$q" -v o="$o" 'BEGIN {
      printf "| %s | %d | %.2f ms | %.2f ms | %.2fx | %.2f ms | %.2f |\n", n, t, f, q, f / q, o, q / o }'
  done
done <<'CASES'
blazeface_front face_detection_front_128x128_barracuda.onnx blazeface128 - minmax
blazeface_back face_detection_back_256x256_barracuda.onnx blazeface256 - minmax
ppocr_det ch_PP-OCRv4_det_infer.onnx ppocr_det x=1,3,192,384 percentile
ppocr_rec ch_PP-OCRv4_rec_infer.onnx ppocr_rec x=1,3,48,320 percentile
mlp_b64(dynamic) mlp_b64.onnx mlp - dynamic
CASES
