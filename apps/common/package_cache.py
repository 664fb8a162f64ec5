"""The Python apps' package cache, as apps/common/package_cache.h: models fetched into the model cache
by scripts/fetch-models.sh are converted into .ingot packages on first use and loaded from them
afterwards, so a launch parses no ONNX and runs no graph passes."""
import hashlib
import os
import sys
import time

try:
    import ingot
except ImportError:  # run from the source tree: the module is built into build/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import ingot

__all__ = ["cached_session", "ingot", "model_cache", "package_cache"]


def model_cache():
    return os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models"))


def package_cache():
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(base, "ingot", "packages")


def cached_session(model_path, package_dir, device, threads, log, tune_shapes=None):
    """The model's package in package_dir (converted on first use), loaded; the key covers the model's
    file (path, size, mtime), the device and the tuning shapes, so a changed model converts again; a
    package this Ingot cannot load (another format version) is converted again too. On a GPU,
    tune_shapes ([{input: dims}, ...]) are the shapes the app runs at: their algorithm choices are
    measured once, at conversion."""
    st = os.stat(model_path)
    gpu = device != "cpu"
    tune_shapes = tune_shapes if gpu else None
    key = hashlib.sha1(f"{os.path.abspath(model_path)}|{st.st_size}|{st.st_mtime_ns}|{device}|{tune_shapes}"
                       .encode()).hexdigest()[:16]
    name = os.path.splitext(os.path.basename(model_path))[0]
    package = os.path.join(package_dir, f"{name}.{device.replace(':', '')}.{key}.ingot")
    converted = False
    if not os.path.exists(package):
        os.makedirs(package_dir, exist_ok=True)
        t0 = time.perf_counter()
        ingot.convert(model_path, package, device=device, tune_shapes=tune_shapes)
        log(f"converted {os.path.basename(model_path)} -> {package} in {1e3 * (time.perf_counter() - t0):.0f} ms")
        converted = True
    try:
        return ingot.Session(package, device=device, threads=threads)
    except ingot.Error:
        if converted:
            raise
        ingot.convert(model_path, package, device=device, tune_shapes=tune_shapes)  # stale (another Ingot wrote it): convert again
        return ingot.Session(package, device=device, threads=threads)
