"""What the GPU tests share: CuPy with a device, or a skip."""
import pytest


def cupy_or_skip():
    """The ``cupy`` module when it is installed and sees a GPU; otherwise the test is skipped."""
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no GPU")
    return cupy
