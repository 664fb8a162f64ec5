#!/usr/bin/env bash
# The wheel (scripts/build-wheel.sh) installs with pip into a folder of its own and works from there,
# outside the build tree: an eager op, a session, and an extension built against the headers the
# wheel carries.
#   wheel_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root="$1" build="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
wheel="$(INGOT_BUILD_DIR="$build" bash "$root/scripts/build-wheel.sh" "$tmp/dist")"
/usr/bin/python3 -m pip install -q --root-user-action=ignore --no-deps --no-index --target "$tmp/site" "$wheel"
cd "$tmp"
PYTHONPATH="$tmp/site" INGOT_EXTENSIONS_DIR="$tmp/ext" /usr/bin/python3 - "$tmp" "$root" <<'PY' 2>"$tmp/stderr" || { cat "$tmp/stderr"; exit 1; }
import os, sys
import numpy as np
tmp, root = sys.argv[1], sys.argv[2]
import ingot
assert ingot.__file__.startswith(os.path.join(tmp, "site")), ingot.__file__
assert ingot.op("Relu", np.array([-1.0, 2.0])).numpy().tolist() == [0.0, 2.0]
import onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, os.path.join(tmp, "relu.onnx"))
y = ingot.Session(os.path.join(tmp, "relu.onnx")).run({"x": np.array([-3.0, 4.0], np.float32)})["y"]
assert y.numpy().tolist() == [0.0, 4.0]
e = ingot.load_extension("wheel_ext", [os.path.join(root, "tests", "extension", "softshrink.cpp")], verbose=True)
assert e.compiled and e.Softshrink(np.array([2.0, 0.1])).numpy().tolist() == [1.5, 0.0]

PY
# The extension compiled against the headers inside the wheel, not the source tree's.
grep -q -- "-I$tmp/site/ingot/include" "$tmp/stderr" || { cat "$tmp/stderr"; echo "FAIL: headers not from the wheel"; exit 1; }
echo "PASS: $(basename "$wheel") installs and runs outside the build tree"
