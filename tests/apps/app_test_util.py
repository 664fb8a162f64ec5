"""Shared by the apps' tests (ocr_test.py, vad_test.py): running an app and checking its errors."""
import subprocess
import sys


def run(cmd, env=None, expect_ok=True):
    """Runs cmd, prints it, its exit status and its output; a failure ends the test unless expected."""
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    print("$", " ".join(cmd), "->", r.returncode)
    print((r.stdout + r.stderr).strip())
    if expect_ok and r.returncode != 0:
        sys.exit(f"FAIL: exit status {r.returncode}")
    return r


def expect_error(cmd, needle, what):
    """cmd must fail with an error message that contains needle (`what` says what was wrong)."""
    r = run(cmd, expect_ok=False)
    if r.returncode == 0 or needle not in r.stderr:
        sys.exit(f"FAIL: {what} must fail with an error containing '{needle}'")
