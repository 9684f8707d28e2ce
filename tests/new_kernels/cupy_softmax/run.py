"""Row softmax through cupy: the kernel of softmax.cu compiled by NVRTC, checked against cupy."""

from pathlib import Path

import cupy as cp

SOURCE = (Path(__file__).parent / "softmax.cu").read_text()
softmax_rows = cp.RawKernel(SOURCE, "softmax_rows")


def run(rows, cols, threads=256):
    x = cp.random.randn(rows, cols, dtype=cp.float32)
    y = cp.empty_like(x)
    softmax_rows((rows,), (threads,), (x, y, cp.int32(rows), cp.int32(cols)), shared_mem=threads * 4)
    expected = cp.exp(x - x.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    assert cp.allclose(y, expected, atol=1e-6)


if __name__ == "__main__":
    for rows, cols in [(4096, 1024), (8192, 4096)]:
        run(rows, cols)
