from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="mypkg",
    packages=["mypkg"],
    package_dir={"": "src"},
    ext_modules=[CppExtension("mypkg._C", ["csrc/swiglu.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
