// driver.h: the subset of the CUDA driver API the launcher uses, loaded with
// dlopen("libcuda.so.1") on first use. The types and constants are declared here
// (no cuda.h needed), so the launcher builds with any C++17 compiler without a CUDA
// toolkit and loads on machines without a GPU, where a call is a clear error.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>

namespace pkgpu {

using CUresult = int;
using CUdevice = int;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUdeviceptr = unsigned long long;

constexpr int kAttrCcMajor = 75;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;            // ..._MINOR
constexpr int kFuncMaxDynamicShared = 8;    // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kCaptureActive = 1;           // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr unsigned kStaticSharedLimit = 48 * 1024;

struct Driver {
  bool ok = false;
  char error[600] = {0};
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext*);
  CUresult (*cuStreamIsCapturing)(CUstream, int*);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void**, void**);
};

template <typename F>
bool bind(void* lib, const char* name, F* out, Driver* d) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) {
    std::snprintf(d->error, sizeof d->error,
                  "the CUDA driver (libcuda.so.1) has no symbol %s; update the NVIDIA "
                  "driver", name);
    return false;
  }
  return true;
}

// Opens libcuda.so.1 and binds every entry point; `ok` false with `error` set on failure.
inline Driver open_driver() {
  Driver d{};  // unbound entry points stay null
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    std::snprintf(d.error, sizeof d.error,
                  "cannot load the CUDA driver library libcuda.so.1 (%s); GPU kernels "
                  "need a machine with an NVIDIA GPU and its driver",
                  why != nullptr ? why : "not found");
    return d;
  }
  bool ok = bind(lib, "cuInit", &d.cuInit, &d) &&
            bind(lib, "cuGetErrorName", &d.cuGetErrorName, &d) &&
            bind(lib, "cuGetErrorString", &d.cuGetErrorString, &d) &&
            bind(lib, "cuCtxGetCurrent", &d.cuCtxGetCurrent, &d) &&
            bind(lib, "cuCtxPushCurrent_v2", &d.cuCtxPushCurrent, &d) &&
            bind(lib, "cuCtxPopCurrent_v2", &d.cuCtxPopCurrent, &d) &&
            bind(lib, "cuCtxGetDevice", &d.cuCtxGetDevice, &d) &&
            bind(lib, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute, &d) &&
            bind(lib, "cuStreamGetCtx", &d.cuStreamGetCtx, &d) &&
            bind(lib, "cuStreamIsCapturing", &d.cuStreamIsCapturing, &d) &&
            bind(lib, "cuModuleLoadData", &d.cuModuleLoadData, &d) &&
            bind(lib, "cuModuleGetFunction", &d.cuModuleGetFunction, &d) &&
            bind(lib, "cuFuncSetAttribute", &d.cuFuncSetAttribute, &d) &&
            bind(lib, "cuMemsetD8Async", &d.cuMemsetD8Async, &d) &&
            bind(lib, "cuLaunchKernel", &d.cuLaunchKernel, &d);
  if (!ok) return d;
  const CUresult rc = d.cuInit(0);
  if (rc != 0) {
    std::snprintf(d.error, sizeof d.error, "cuInit failed with CUDA error %d", rc);
    return d;
  }
  d.ok = true;
  return d;
}

// The process's driver, opened on first use. A function-local static (thread-safe
// initialization) rather than std::call_once with a lambda: in an inline function
// the latter instantiates a std template that the library would export.
inline const Driver& driver() {
  static const Driver d = open_driver();
  return d;
}

// "CUDA_ERROR_X (text)" for a driver result.
inline void describe(CUresult rc, char* out, size_t cap) {
  const Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.ok) {
    d.cuGetErrorName(rc, &name);
    d.cuGetErrorString(rc, &text);
  }
  std::snprintf(out, cap, "%s (%s)", name != nullptr ? name : "CUDA error",
                text != nullptr ? text : "no description");
}

}  // namespace pkgpu
