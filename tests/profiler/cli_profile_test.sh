#!/usr/bin/env bash
# `ingot profile` on a static-shape ONNX node case: summary, trace and report; `ingot run --profile`;
# a model with symbolic input dims asks for --input.  Usage: cli_profile_test.sh INGOT
set -euo pipefail
ingot="$1"
data=/usr/share/libonnx-testdata/data/node
model="$data/test_conv_with_strides_padding/model.onnx"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ingot" profile "$model" --runs 3 --warmup 1 --trace "$tmp/trace.json" --html "$tmp/report.html" >"$tmp/out.txt"
cat "$tmp/out.txt"
grep -Eq '^Conv +3 ' "$tmp/out.txt" || { echo "FAIL: no 'Conv 3' row in the summary"; exit 1; }
grep -q 'peak live' "$tmp/out.txt" || { echo "FAIL: no allocation line"; exit 1; }
grep -q '<canvas id="timeline">' "$tmp/report.html" || { echo "FAIL: report has no timeline canvas"; exit 1; }

"$ingot" run "$model" --input "$data/test_conv_with_strides_padding/test_data_set_0/input_0.pb" \
  --input "$data/test_conv_with_strides_padding/test_data_set_0/input_1.pb" --profile "$tmp/run.json" >/dev/null

/usr/bin/python3 - "$tmp/trace.json" "$tmp/run.json" <<'PY'
import json, sys
for path, runs in ((sys.argv[1], 3), (sys.argv[2], 1)):
    events = json.load(open(path))["traceEvents"]
    convs = [e for e in events if e["ph"] == "X" and e["cat"] == "Conv"]
    sessions = [e for e in events if e["ph"] == "X" and e["cat"] == "session"]
    assert len(convs) == runs and len(sessions) == runs, (path, len(convs), len(sessions))
    for e in convs:
        assert e["args"]["input_shapes"] == [[1, 1, 7, 5], [1, 1, 3, 3]], e
        assert e["args"]["input_dtypes"] == ["float32", "float32"], e
        assert e["ts"] >= 0 and e["dur"] >= 0
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in events)
print("traces ok")
PY

# Random inputs need static shapes: a symbolic dim is an error naming the input.
symbolic="$data/test_sequence_map_add_1_sequence_1_tensor/model.onnx"
if "$ingot" profile "$symbolic" 2>"$tmp/err.txt"; then echo "FAIL: symbolic input accepted"; exit 1; fi
cat "$tmp/err.txt"
grep -q "input 'x0' has a symbolic shape" "$tmp/err.txt" && grep -q -- '--input x0=' "$tmp/err.txt" ||
  { echo "FAIL: error does not name the input and --input"; exit 1; }
echo PASS
