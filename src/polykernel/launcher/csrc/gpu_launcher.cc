// gpu_launcher.cc: polykernel's one native launcher for compiled GPU kernels.
//
// Numba-CUDA, Triton and Warp kernels arrive here as images (cubin or PTX) plus a
// launch spec; each is registered once under a content-derived id (see
// polykernel/gpu/launcher.py). At run time XLA calls the FFI handler below with the
// id as the string attribute `kernel`; the handler finds the kernel in a
// process-wide table, checks the buffers against the spec, packs the kernel
// parameters (a byte template with the buffer pointers patched in) and calls
// cuLaunchKernel on XLA's stream. No Python runs per call, and a call always
// launches the same work for the same shapes, so the handler may be recorded into a
// CUDA graph (the `polykernel_gpu_launch` handler says so; the `_nograph` one not).
//
// Only the CUDA driver API is used, loaded with dlopen("libcuda.so.1") on first
// use: the library builds with any C++17 compiler without a CUDA toolkit and loads
// on machines without a GPU (a call there is a clear error). Messages are
// formatted with snprintf (no iostreams, see docs/native.md).
//
// Under jax.vmap (vmap_method "expand_dims" / "broadcast_all") buffers arrive with
// K extra leading batch axes. Every output carries the whole batch shape; an input
// carries it too, or has size 1 along a batch axis (broadcast), or is unbatched.
// The kernel is then launched once per batch element with pointers offset to that
// element: the same loop polykernel/gpu/batching.py runs for the emulators.
//
// The pieces live in gpu_launcher/ (on the include path of the build, see
// polykernel/gpu/launcher_build.py; every file there is part of its cache key):
// driver.h (the CUDA driver API subset), spec.h (a registered kernel and its launch
// spec), plan.h (the buffers and launches of one call), load.h (loading a kernel
// into a context). This file holds the kernel table, the FFI handler and the
// exported C functions.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "polykernel.h"

#include "driver.h"
#include "load.h"
#include "plan.h"
#include "spec.h"

namespace pkgpu {

// ---- the registered kernels of this process -------------------------------------
std::shared_mutex g_table_mutex;
std::unordered_map<std::string_view, std::unique_ptr<Kernel>> g_table;

Kernel* find_kernel(std::string_view id) {
  std::shared_lock<std::shared_mutex> lock(g_table_mutex);
  auto it = g_table.find(id);
  return it == g_table.end() ? nullptr : it->second.get();
}

// ---- the FFI handler ------------------------------------------------------------
constexpr char kWhere[] = "polykernel GPU launcher";

bool kernel_attribute(const XLA_FFI_CallFrame* f, std::string_view* id) {
  for (int64_t i = 0; i < f->attrs.size; ++i) {
    const XLA_FFI_ByteSpan* name = f->attrs.names[i];
    if (std::string_view(name->ptr, name->len) == "kernel" &&
        f->attrs.types[i] == XLA_FFI_AttrType_STRING) {
      const auto* value = static_cast<const XLA_FFI_ByteSpan*>(f->attrs.attrs[i]);
      *id = std::string_view(value->ptr, value->len);
      return true;
    }
  }
  return false;
}

XLA_FFI_Error* fail(const XLA_FFI_CallFrame* f, const char* msg) {
  return pk::ffi::errorf(f->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: %s", kWhere, msg);
}

XLA_FFI_Error* run(XLA_FFI_CallFrame* f, Kernel& k, const View* v, void* stream_ptr) {
  char err[1024];
  Plan plan;
  if (!plan_batch(k, v, &plan, err, sizeof err)) return fail(f, err);
  const Driver& d = driver();
  if (!d.ok) return fail(f, d.error);
  auto stream = static_cast<CUstream>(stream_ptr);
  char why[256];
  if (k.degenerate()) {  // an empty grid launches nothing: outputs read as zeros
    for (int64_t i = k.n_in; i < k.n_in + k.n_out; ++i) {
      int64_t bytes = k.buffers[i].itemsize * plan.launches;
      for (int64_t dim : k.buffers[i].dims) bytes *= dim;
      if (bytes == 0) continue;
      const CUresult rc = d.cuMemsetD8Async(v[i].data, 0, static_cast<size_t>(bytes), stream);
      if (rc != 0) {
        describe(rc, why, sizeof why);
        std::snprintf(err, sizeof err, "%s: zero-filling output %lld failed: %s",
                      k.name.c_str(), static_cast<long long>(i - k.n_in), why);
        return fail(f, err);
      }
    }
    return nullptr;
  }
  // Inside a graph capture cuStreamGetCtx is unreliable (the reason jaxlib's Triton
  // launcher uses the current context there); XLA keeps the device's context current.
  int capturing = 0;
  CUcontext ctx = nullptr, current = nullptr;
  CUresult rc = d.cuStreamIsCapturing(stream, &capturing);
  if (rc == 0) rc = d.cuCtxGetCurrent(&current);
  if (rc == 0) {
    if (capturing == kCaptureActive) ctx = current;
    else rc = d.cuStreamGetCtx(stream, &ctx);
  }
  if (rc != 0 || ctx == nullptr) {
    describe(rc, why, sizeof why);
    std::snprintf(err, sizeof err, "%s: cannot find the CUDA context of XLA's stream: %s",
                  k.name.c_str(), why);
    return fail(f, err);
  }
  const bool push = ctx != current;
  if (push && (rc = d.cuCtxPushCurrent(ctx)) != 0) {
    describe(rc, why, sizeof why);
    std::snprintf(err, sizeof err, "%s: cuCtxPushCurrent failed: %s", k.name.c_str(), why);
    return fail(f, err);
  }
  XLA_FFI_Error* result = nullptr;
  CUfunction fn = nullptr;
  if (!load(k, ctx, &fn, err, sizeof err)) {
    result = fail(f, err);
  } else {
    std::vector<uint64_t> blob(k.templ.size() + 1);
    std::vector<void*> params(k.param_offsets.size());
    for (size_t j = 0; j < params.size(); ++j) {
      params[j] = reinterpret_cast<char*>(blob.data()) + k.param_offsets[j];
    }
    int64_t offsets[kMaxBuffers];
    for (int64_t launch = 0; launch < plan.launches && result == nullptr; ++launch) {
      batch_offsets(k, plan, launch, offsets);
      if (!pack(k, v, offsets, blob.data(), err, sizeof err)) {
        result = fail(f, err);
        break;
      }
      rc = d.cuLaunchKernel(fn, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                            k.block[2], k.shared_mem, stream, params.data(), nullptr);
      if (rc != 0) {
        describe(rc, why, sizeof why);
        std::snprintf(err, sizeof err, "%s: cuLaunchKernel(grid=(%u, %u, %u), block=(%u, "
                      "%u, %u), shared_mem=%u) failed: %s", k.name.c_str(), k.grid[0],
                      k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
                      k.shared_mem, why);
        result = fail(f, err);
      }
    }
  }
  if (push) d.cuCtxPopCurrent(&current);
  return result;
}

XLA_FFI_Error* handle(XLA_FFI_CallFrame* f, XLA_FFI_Handler_Traits traits) {
  if (pk::ffi::is_metadata_query(f)) return pk::ffi::answer_metadata(f, traits);
  if (f->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE ||
      f->stage != XLA_FFI_ExecutionStage_EXECUTE) {
    return fail(f, "unexpected call frame (size or execution stage); check installed "
                   "jax/jaxlib versions");
  }
  std::string_view id;
  if (!kernel_attribute(f, &id)) {
    return fail(f, "the call has no string attribute 'kernel' naming a registered kernel");
  }
  Kernel* k = find_kernel(id);
  if (k == nullptr) {
    char msg[512];
    std::snprintf(msg, sizeof msg, "kernel '%.*s' is not registered in this process. "
                  "Build the polykernel GPU kernel (numba_cuda_kernel, triton_kernel, ...) "
                  "in this process before running a program that calls it, e.g. one "
                  "loaded with jax.export.deserialize", static_cast<int>(id.size()), id.data());
    return fail(f, msg);
  }
  if (f->args.size != k->n_in || f->rets.size != k->n_out) {
    char msg[512];
    std::snprintf(msg, sizeof msg, "%s: called with %lld input(s) and %lld output(s), the "
                  "kernel takes %lld and %lld", k->name.c_str(),
                  static_cast<long long>(f->args.size), static_cast<long long>(f->rets.size),
                  static_cast<long long>(k->n_in), static_cast<long long>(k->n_out));
    return fail(f, msg);
  }
  View views[kMaxBuffers];
  for (int64_t i = 0; i < k->n_in + k->n_out; ++i) {
    const bool ret = i >= k->n_in;
    const int64_t j = ret ? i - k->n_in : i;
    const auto type = ret ? static_cast<int>(f->rets.types[j]) : static_cast<int>(f->args.types[j]);
    if (type != XLA_FFI_ArgType_BUFFER) return fail(f, "an operand is not a buffer");
    auto* b = static_cast<XLA_FFI_Buffer*>(ret ? f->rets.rets[j] : f->args.args[j]);
    views[i] = View{reinterpret_cast<uintptr_t>(b->data), static_cast<int64_t>(b->dtype),
                    b->rank, b->dims};
  }
  void* stream = nullptr;
  if (XLA_FFI_Error* e = pk::ffi::get_stream(f, &stream)) return e;
  return run(f, *k, views, stream);
}

}  // namespace pkgpu

#define PKGPU_EXPORT extern "C" __attribute__((visibility("default")))

PKGPU_EXPORT XLA_FFI_Error* polykernel_gpu_launch(XLA_FFI_CallFrame* f) {
  return pkgpu::handle(f, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
}

PKGPU_EXPORT XLA_FFI_Error* polykernel_gpu_launch_nograph(XLA_FFI_CallFrame* f) {
  return pkgpu::handle(f, 0u);
}

PKGPU_EXPORT int pkgpu_abi_version() { return PKGPU_ABI_VERSION; }

// Register a kernel under `id` (0: registered or already there; 1: error in `err`).
PKGPU_EXPORT int pkgpu_register(const char* id, const char* name, const char* entry,
                                const uint8_t* spec, int64_t spec_len, int64_t n_images,
                                const int64_t* kinds, const int64_t* arches,
                                const uint8_t* const* images, const int64_t* sizes,
                                char* err, int64_t err_cap) {
  using namespace pkgpu;
  auto k = std::make_unique<Kernel>();
  k->id = id;
  k->name = name;
  k->entry = entry;
  if (!parse_spec(spec, spec_len, k.get(), err, static_cast<size_t>(err_cap))) return 1;
  for (int64_t i = 0; i < n_images; ++i) {
    Image im{kinds[i], arches[i], std::string(reinterpret_cast<const char*>(images[i]),
                                              static_cast<size_t>(sizes[i]))};
    im.bytes.push_back('\0');  // PTX must be NUL-terminated; harmless after a cubin
    k->images.push_back(std::move(im));
  }
  std::unique_lock<std::shared_mutex> lock(g_table_mutex);
  if (g_table.count(k->id) == 0) {
    std::string_view key = k->id;
    g_table.emplace(key, std::move(k));
  }
  return 0;
}

PKGPU_EXPORT int64_t pkgpu_kernel_count() {
  std::shared_lock<std::shared_mutex> lock(pkgpu::g_table_mutex);
  return static_cast<int64_t>(pkgpu::g_table.size());
}

// 1 when the CUDA driver loaded; else 0 with the reason in `out`.
PKGPU_EXPORT int pkgpu_driver_status(char* out, int64_t cap) {
  const pkgpu::Driver& d = pkgpu::driver();
  std::snprintf(out, static_cast<size_t>(cap), "%s", d.ok ? "ok" : d.error);
  return d.ok ? 1 : 0;
}

// What a call with these buffers would launch, without a GPU: the batch plan and
// every launch's parameter bytes (tests compare them with polykernel/gpu/layout.py).
// Returns the number of launches (0 for an empty grid: outputs are zero-filled), or
// -1 with the handler's message in `err`. With `out == nullptr` only counts.
PKGPU_EXPORT int64_t pkgpu_plan_launches(const char* id, int64_t n_buffers,
                                         const int64_t* dtypes, const int64_t* ranks,
                                         const int64_t* dims, const uint64_t* data,
                                         uint8_t* out, int64_t out_cap, char* err,
                                         int64_t err_cap) {
  using namespace pkgpu;
  Kernel* k = find_kernel(id);
  const size_t cap = static_cast<size_t>(err_cap);
  if (k == nullptr || n_buffers != k->n_in + k->n_out) {
    std::snprintf(err, cap, "unknown kernel or wrong buffer count");
    return -1;
  }
  View v[kMaxBuffers];
  for (int64_t i = 0, at = 0; i < n_buffers; at += ranks[i], ++i) {
    v[i] = View{static_cast<uintptr_t>(data[i]), dtypes[i], ranks[i], dims + at};
  }
  Plan plan;
  if (!plan_batch(*k, v, &plan, err, cap)) return -1;
  if (k->degenerate()) return 0;
  if (out == nullptr) return plan.launches;  // a query for the size of `out`
  if (plan.launches * k->templ_len > out_cap) {
    std::snprintf(err, cap, "output buffer too small");
    return -1;
  }
  std::vector<uint64_t> blob(k->templ.size() + 1);
  int64_t offsets[kMaxBuffers];
  for (int64_t launch = 0; launch < plan.launches; ++launch) {
    batch_offsets(*k, plan, launch, offsets);
    if (!pack(*k, v, offsets, blob.data(), err, cap)) return -1;
    std::memcpy(out + launch * k->templ_len, blob.data(), static_cast<size_t>(k->templ_len));
  }
  return plan.launches;
}
