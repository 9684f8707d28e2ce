from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension


def kernel_sources():
    import os
    return [f for f in os.listdir("csrc") if f.endswith(".cu")]


setup(
    name="unreadable",
    ext_modules=[CUDAExtension("unreadable_cuda", sources=kernel_sources())],
    cmdclass={"build_ext": BuildExtension},
)
