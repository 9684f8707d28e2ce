// Declarations only, for the device-code analysis of a hipified torch extension without a ROCm
// build of torch (workers/torch_ext/gfx942.py): hipify points the extension's
// ATen/cuda/CUDAContext.h, c10/cuda/CUDAGuard.h, ... at ATen/hip and c10/hip headers, which only
// a ROCm torch ships, and leaves the code calling at::cuda / c10::cuda as ROCm torch's
// "masquerading" API offers it. The host code must only parse: nothing here is defined or linked.
#pragma once
#include <optional>
#include <hip/hip_runtime.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace c10::cuda {
class CUDAStream {
 public:
  hipStream_t stream() const;
  operator hipStream_t() const;
  operator c10::Stream() const;
  c10::Stream unwrap() const;
  c10::DeviceIndex device_index() const;
  c10::Device device() const;
  void synchronize() const;
};
CUDAStream getCurrentCUDAStream(c10::DeviceIndex device_index = -1);
CUDAStream getDefaultCUDAStream(c10::DeviceIndex device_index = -1);
CUDAStream getStreamFromPool(bool high_priority = false, c10::DeviceIndex device_index = -1);
void setCurrentCUDAStream(CUDAStream stream);
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
void device_synchronize();
struct CUDAGuard {
  explicit CUDAGuard(c10::DeviceIndex device_index);
  explicit CUDAGuard(c10::Device device);
};
struct OptionalCUDAGuard {
  OptionalCUDAGuard();
  explicit OptionalCUDAGuard(std::optional<c10::Device> device);
  explicit OptionalCUDAGuard(std::optional<c10::DeviceIndex> device_index);
  void set_index(c10::DeviceIndex device_index);
};
struct CUDAStreamGuard {
  explicit CUDAStreamGuard(c10::Stream stream);
};
}  // namespace c10::cuda

namespace at::cuda {
using namespace c10::cuda;
hipDeviceProp_t* getCurrentDeviceProperties();
hipDeviceProp_t* getDeviceProperties(c10::DeviceIndex device);
int warp_size();
}  // namespace at::cuda

#define C10_CUDA_CHECK(expr) ((void)(expr))
#define C10_CUDA_CHECK_WARN(expr) ((void)(expr))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)
#define AT_CUDA_CHECK(expr) C10_CUDA_CHECK(expr)
