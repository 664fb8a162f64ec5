# pytest setup for the Python module's tests: `import ingot` from the build tree (PYTHONPATH, set by
# ctest's python.pytest to build/python) and the paths of the shared test inputs.
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ONNX_NODE_TESTS = "/usr/share/libonnx-testdata/data/node"


@pytest.fixture(scope="session")
def model_cache():
    """The real models (scripts/fetch-models.sh), or a skip when they were not fetched."""
    cache = os.environ.get("INGOT_MODEL_CACHE") or os.path.expanduser("~/.cache/ingot/models")
    if not os.path.isdir(cache):
        pytest.skip(f"no model cache at {cache} (scripts/fetch-models.sh)")
    return cache
