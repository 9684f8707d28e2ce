from mypkg import _C


def swiglu(a, b):
    """The package's Python face of its compiled extension, as `pip install .` leaves it."""
    return _C.swiglu(a.contiguous(), b.contiguous())
