"""The torch-extension build command as a string."""

from workers.cuda import pybind_build

INFO = pybind_build.TorchBuildInfo(
    include_dirs=("/t/include", "/t/include/torch/csrc/api/include"), library_dir="/t/lib",
    python_include="/py/include/python3.12", extension_suffix=".cpython-312-x86_64-linux-gnu.so",
    cxx11_abi=True, cuda="13.0")


def test_pybind_command():
    out = pybind_build.output_name("tk_kernel", INFO)
    assert out == "tk_kernel.cpython-312-x86_64-linux-gnu.so"
    cmd = pybind_build.pybind_command("nvcc", ["g.cu"], "tk_kernel", ["sm_90a"], INFO, out, ["-O3"])
    assert " ".join(cmd) == (
        "nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC --resource-usage -gencode arch=compute_90a,code=sm_90a "
        "-DTORCH_EXTENSION_NAME=tk_kernel -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1 "
        "-I/t/include -I/t/include/torch/csrc/api/include -I/py/include/python3.12 "
        "-L/t/lib -Xlinker=-rpath,/t/lib -lc10 -lc10_cuda -ltorch -ltorch_cpu -ltorch_cuda -ltorch_python "
        "-o tk_kernel.cpython-312-x86_64-linux-gnu.so g.cu")


def test_installed_torch_info():
    info = pybind_build.torch_build_info()
    assert info.extension_suffix.endswith(".so")
    assert any(d.endswith("include") for d in info.include_dirs)
