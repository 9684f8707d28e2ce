import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))

setup(
    name="myext",
    ext_modules=[CppExtension("myext_cpp", sources=sorted(glob.glob("csrc/*.cpp")),
                              extra_compile_args={"cxx": ["-O2"]})],
    cmdclass={"build_ext": BuildExtension},
)
