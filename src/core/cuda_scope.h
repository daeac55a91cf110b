// Scoped CUDA thread state that several layers need: the current device, and the stream
// capture mode. Header-only; for components that use the CUDA runtime.
#pragma once
#include <cuda_runtime_api.h>

namespace braid {

// Makes `dev` the calling thread's current device until the scope ends, then puts the
// previous device back. With dev < 0 it only puts the device back at the end (for code that
// switches devices itself). error() is cudaSetDevice's result (cleared from CUDA's last error).
class DeviceScope {
 public:
  explicit DeviceScope(int dev = -1) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    restore_ = dev < 0;
    if (dev >= 0 && dev != previous_) {
      error_ = cudaSetDevice(dev);
      if (error_ != cudaSuccess) (void)cudaGetLastError();
      restore_ = error_ == cudaSuccess;
    }
  }
  ~DeviceScope() {
    if (restore_ && previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  cudaError_t error() const { return error_; }

 private:
  int previous_ = -1;
  bool restore_ = false;
  cudaError_t error_ = cudaSuccess;
};

// While a stream is captured in the default (global) mode, CUDA refuses calls such as
// cudaMalloc or cudaStreamQuery in every thread. Setup work that enters no graph relaxes the
// calling thread's mode for the scope.
class RelaxedCapture {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&saved_); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&saved_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode saved_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace braid
