#!/usr/bin/env bash
# Regenerates tests/onnx/<suite>_expected_failures.txt from a run of `ingot test-onnx`, keeping the
# hand-written reasons of entries that still fail and marking new ones "unsupported op X" or with the
# failure message, which should then be edited into a real reason.
#   scripts/update-expected-failures.sh build/tools/ingot/ingot [suite...]
set -euo pipefail
INGOT="$1"
shift
SUITES=("${@:-node pytorch-converted pytorch-operator simple}")
cd "$(dirname "$0")/.."
for suite in ${SUITES[@]}; do
  file="tests/onnx/${suite}_expected_failures.txt"
  touch "$file"
  "$INGOT" test-onnx "/usr/share/libonnx-testdata/data/$suite" --json /tmp/ingot-$suite.json >/dev/null || true
  /usr/bin/python3 - "$file" "/tmp/ingot-$suite.json" "$suite" <<'PY'
import json, re, sys
path, results, suite = sys.argv[1:]
old = {}
for line in open(path):
    line = line.strip()
    if line and not line.startswith("#"):
        name, _, reason = line.partition(" ")
        old[name] = reason.strip()
cases = json.load(open(results))["cases"]
out = [f"# ONNX backend suite '{suite}': cases expected to fail on the CPU, one per line: NAME REASON.",
       "# Regenerate with scripts/update-expected-failures.sh; a case that passes again is reported as XPASS."]
for c in cases:
    if c["status"] == "passed":
        continue
    reason = old.get(c["name"])
    if not reason:
        m = re.search(r"unsupported op ([\w.]+)", c["reason"])
        reason = f"op {m.group(1)} has no CPU kernel yet" if m else c["reason"].splitlines()[0]
    out.append(f"{c['name']} {reason}")
open(path, "w").write("\n".join(out) + "\n")
print(f"{suite}: {len(out) - 2} expected failures")
PY
done
