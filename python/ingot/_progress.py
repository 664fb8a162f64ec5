"""Progress lines for long calls (ingot.convert(progress=True)): one line per step on stderr."""
import sys
import time

_started = {}


def print_step(step: str, done: bool, note: str) -> None:
    if not done:
        _started[step] = time.perf_counter()
        return
    ms = (time.perf_counter() - _started.pop(step, time.perf_counter())) * 1e3
    print(f"ingot.convert: {step:<10} {ms:8.1f} ms{'  (' + note + ')' if note else ''}", file=sys.stderr, flush=True)
