// load.h: loading a registered kernel into a CUDA context: pick the image that
// suits the device (cubin, else PTX the driver compiles), load its module once per
// context and cache the function handle, so later calls take no lock.
#pragma once

#include <cstdio>
#include <mutex>

#include "driver.h"
#include "spec.h"

namespace pkgpu {

inline const Image* pick_image(const Kernel& k, int cc) {
  const Image* best = nullptr;
  // An exact cubin, else a cubin of the same major and a lower minor, else PTX.
  for (const Image& im : k.images) {
    if (im.kind == kImageCubin && im.arch == cc) return &im;
  }
  for (const Image& im : k.images) {
    if (im.kind == kImageCubin && im.arch / 10 == cc / 10 && im.arch < cc &&
        (best == nullptr || im.arch > best->arch)) best = &im;
  }
  if (best != nullptr) return best;
  for (const Image& im : k.images) {
    if (im.kind == kImagePtx && im.arch <= cc && (best == nullptr || im.arch > best->arch))
      best = &im;
  }
  return best;
}

inline CUfunction find_loaded(Kernel& k, CUcontext ctx) {
  const int n = k.n_loaded.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (k.contexts[i] == ctx) return k.functions[i];
  }
  return nullptr;
}

// The kernel's function in `ctx` (current on this thread), loading it on first use.
inline bool load(Kernel& k, CUcontext ctx, CUfunction* out, char* err,
                 size_t err_cap) {
  if ((*out = find_loaded(k, ctx)) != nullptr) return true;
  std::lock_guard<std::mutex> lock(k.load_mutex);
  if ((*out = find_loaded(k, ctx)) != nullptr) return true;
  const Driver& d = driver();
  char why[256];
  CUdevice dev = 0;
  int major = 0, minor = 0;
  CUresult rc = d.cuCtxGetDevice(&dev);
  if (rc == 0) rc = d.cuDeviceGetAttribute(&major, kAttrCcMajor, dev);
  if (rc == 0) rc = d.cuDeviceGetAttribute(&minor, kAttrCcMinor, dev);
  if (rc != 0) {
    describe(rc, why, sizeof why);
    PKGPU_FAIL("%s: cannot read the device's compute capability: %s", k.name.c_str(), why);
  }
  const int cc = major * 10 + minor;
  const Image* im = pick_image(k, cc);
  if (im == nullptr) {
    char have[256] = "";
    size_t used = 0;
    for (const Image& i : k.images) {
      used += std::snprintf(have + used, sizeof have - used, "%s%s sm_%lld",
                            used ? ", " : "", i.kind == kImageCubin ? "cubin" : "PTX",
                            static_cast<long long>(i.arch));
      if (used >= sizeof have) break;
    }
    PKGPU_FAIL("%s: no image for this GPU (sm_%d); it was compiled for %s. Set "
               "POLYKERNEL_CUDA_ARCH=%d (or polykernel.config.set_compute_capability) "
               "before the kernel is built", k.name.c_str(), cc, have, cc);
  }
  if (k.n_loaded.load() >= kMaxContexts) {
    PKGPU_FAIL("%s: loaded into more than %d CUDA contexts", k.name.c_str(), kMaxContexts);
  }
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  rc = d.cuModuleLoadData(&module, im->bytes.data());
  if (rc != 0) {
    describe(rc, why, sizeof why);
    PKGPU_FAIL("%s: cuModuleLoadData of its %s for sm_%lld failed on sm_%d: %s",
               k.name.c_str(), im->kind == kImageCubin ? "cubin" : "PTX",
               static_cast<long long>(im->arch), cc, why);
  }
  k.modules.push_back(module);
  rc = d.cuModuleGetFunction(&fn, module, k.entry.c_str());
  if (rc == 0 && k.shared_mem > kStaticSharedLimit) {
    rc = d.cuFuncSetAttribute(fn, kFuncMaxDynamicShared, static_cast<int>(k.shared_mem));
  }
  if (rc != 0) {
    describe(rc, why, sizeof why);
    PKGPU_FAIL("%s: preparing entry '%s' failed: %s", k.name.c_str(), k.entry.c_str(), why);
  }
  const int slot = k.n_loaded.load();
  k.contexts[slot] = ctx;
  k.functions[slot] = fn;
  k.n_loaded.store(slot + 1, std::memory_order_release);
  *out = fn;
  return true;
}

}  // namespace pkgpu
