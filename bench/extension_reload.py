"""How long ingot.load_extension takes: the first build, and a reload of the unchanged extension in
fresh processes (the target: < 0.3 s). Results: docs/CUSTOM_OPS.md.

    PYTHONPATH=build/python /usr/bin/python3 bench/extension_reload.py [--cuda] [--runs 10] [--json FILE]

Each reload runs in a new interpreter (python -c), which imports ingot and calls load_extension; the
time reported is load_extension's own wall time (ExtensionInfo.seconds) and the whole process's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(code):
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", action="store_true", help="the CUDA example (softshrink.cu + .cpp, nvcc)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    ex = os.path.join(ROOT, "examples", "custom-op")
    sources = [os.path.join(ex, "softshrink.cpp")] + ([os.path.join(ex, "softshrink.cu")] if args.cuda else [])
    flags = ["-DWITH_CUDA"] if args.cuda else []
    cache = tempfile.mkdtemp(prefix="ingot-ext-bench-")
    # With --cuda, the CUDA driver is initialized first (what the process's first CUDA call costs,
    # whoever makes it) and timed apart from load_extension.
    code = f"""
        import json, time
        t0 = time.perf_counter()
        import ingot
        t1 = time.perf_counter()
        if {args.cuda!r}:
            ingot.synchronize("cuda")
        t2 = time.perf_counter()
        e = ingot.load_extension("softshrink_bench", {sources!r}, extra_cflags={flags!r}, build_directory={cache!r})
        print(json.dumps({{"compiled": e.compiled, "load_s": e.seconds, "import_s": t1 - t0, "cuda_init_s": t2 - t1}}))"""
    first, first_wall = run(code)
    assert first["compiled"]
    reloads = []
    for _ in range(args.runs):
        r, wall = run(code)
        assert not r["compiled"], "an unchanged extension was compiled again"
        reloads.append((r["load_s"], r["import_s"], wall, r["cuda_init_s"]))
    result = {
        "sources": [os.path.basename(s) for s in sources],
        "first_build_s": first["load_s"],
        "reload_load_extension_s_median": statistics.median(r[0] for r in reloads),
        "reload_load_extension_s_max": max(r[0] for r in reloads),
        "reload_import_ingot_s_median": statistics.median(r[1] for r in reloads),
        "reload_process_wall_s_median": statistics.median(r[2] for r in reloads),
        "reload_cuda_init_s_median": statistics.median(r[3] for r in reloads),
        "runs": args.runs,
    }
    print(f"ingot.load_extension {'+'.join(result['sources'])}: first build {result['first_build_s']:.2f} s; "
          f"reload in a fresh process: load_extension {result['reload_load_extension_s_median'] * 1e3:.1f} ms median "
          f"(max {result['reload_load_extension_s_max'] * 1e3:.1f} ms), CUDA initialized before it "
          f"{result['reload_cuda_init_s_median'] * 1e3:.0f} ms, import ingot "
          f"{result['reload_import_ingot_s_median'] * 1e3:.0f} ms, whole process "
          f"{result['reload_process_wall_s_median']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
