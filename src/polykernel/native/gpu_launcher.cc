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
#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "polykernel.h"

// Keep in step with polykernel/gpu/launcher.py (LAUNCHER_ABI) and layout.py.
#define PKGPU_ABI_VERSION 1
#define PKGPU_SPEC_MAGIC 0x314C4B50  // "PKL1"

namespace pkgpu {

// ---- the CUDA driver API subset we use (declared here: no cuda.h needed) ----------
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

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      std::snprintf(d.error, sizeof d.error,
                    "cannot load the CUDA driver library libcuda.so.1 (%s); GPU kernels "
                    "need a machine with an NVIDIA GPU and its driver",
                    why != nullptr ? why : "not found");
      return;
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
    if (!ok) return;
    const CUresult rc = d.cuInit(0);
    if (rc != 0) {
      std::snprintf(d.error, sizeof d.error, "cuInit failed with CUDA error %d", rc);
      return;
    }
    d.ok = true;
  });
  return d;
}

// "CUDA_ERROR_X (text)" for a driver result.
void describe(CUresult rc, char* out, size_t cap) {
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

// ---- a registered kernel --------------------------------------------------------
constexpr int kMaxBuffers = 64;
constexpr int kMaxBatchRank = 8;
constexpr int kMaxContexts = 64;
constexpr int kImageCubin = 0;
constexpr int kImagePtx = 1;

struct BufferSpec {
  int64_t dtype;
  int64_t itemsize;
  std::vector<int64_t> dims;
};

struct Patch {
  int64_t param;
  int64_t buffer;
  int64_t align;
};

struct Image {
  int64_t kind;
  int64_t arch;  // e.g. 90 for sm_90
  std::string bytes;
};

struct Kernel {
  std::string id, name, entry;
  int64_t n_in = 0, n_out = 0;
  std::vector<BufferSpec> buffers;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared_mem = 0;
  std::vector<int64_t> param_offsets;
  std::vector<uint64_t> templ;  // 8-byte aligned storage for the parameter bytes
  int64_t templ_len = 0;
  std::vector<Patch> patches;
  std::vector<Image> images;

  std::mutex load_mutex;
  std::atomic<int> n_loaded{0};
  CUcontext contexts[kMaxContexts] = {};
  CUfunction functions[kMaxContexts] = {};
  std::vector<CUmodule> modules;  // never unloaded: recorded CUDA graphs use them

  bool degenerate() const {
    for (int i = 0; i < 3; ++i) {
      if (grid[i] == 0 || block[i] == 0) return true;
    }
    return false;
  }
};

std::shared_mutex g_table_mutex;
std::unordered_map<std::string_view, std::unique_ptr<Kernel>> g_table;

Kernel* find_kernel(std::string_view id) {
  std::shared_lock<std::shared_mutex> lock(g_table_mutex);
  auto it = g_table.find(id);
  return it == g_table.end() ? nullptr : it->second.get();
}

// ---- the launch spec, as encoded by polykernel/gpu/layout.py --------------------
class Reader {
 public:
  Reader(const uint8_t* data, int64_t len) : data_(data), len_(len) {}
  bool word(int64_t* out) {
    if (pos_ + 8 > len_) return fail();
    std::memcpy(out, data_ + pos_, 8);
    pos_ += 8;
    return true;
  }
  bool bytes(void* out, int64_t n) {
    if (n < 0 || pos_ + n > len_) return fail();
    std::memcpy(out, data_ + pos_, static_cast<size_t>(n));
    pos_ += (n + 7) / 8 * 8;
    return true;
  }
  bool done() const { return pos_ == len_; }
  bool ok() const { return ok_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  const uint8_t* data_;
  int64_t len_;
  int64_t pos_ = 0;
  bool ok_ = true;
};

#define PKGPU_FAIL(...)                                  \
  do {                                                   \
    std::snprintf(err, err_cap, __VA_ARGS__);            \
    return false;                                        \
  } while (0)

bool parse_spec(const uint8_t* data, int64_t len, Kernel* k, char* err, size_t err_cap) {
  Reader r(data, len);
  int64_t magic = 0, version = 0, n = 0;
  if (!r.word(&magic) || !r.word(&version) || magic != PKGPU_SPEC_MAGIC ||
      version != PKGPU_ABI_VERSION) {
    PKGPU_FAIL("launch spec has magic %llx version %lld, expected %x version %d",
               static_cast<unsigned long long>(magic), static_cast<long long>(version),
               PKGPU_SPEC_MAGIC, PKGPU_ABI_VERSION);
  }
  if (!r.word(&k->n_in) || !r.word(&k->n_out) || k->n_in < 0 || k->n_out < 1 ||
      k->n_in + k->n_out > kMaxBuffers) {
    PKGPU_FAIL("launch spec: bad buffer counts (at most %d buffers)", kMaxBuffers);
  }
  for (int64_t i = 0; i < k->n_in + k->n_out; ++i) {
    BufferSpec b;
    int64_t rank = 0;
    if (!r.word(&b.dtype) || !r.word(&b.itemsize) || !r.word(&rank) || rank < 0 ||
        rank > 32 || b.itemsize <= 0) {
      PKGPU_FAIL("launch spec: bad buffer %lld", static_cast<long long>(i));
    }
    b.dims.resize(static_cast<size_t>(rank));
    for (auto& d : b.dims) {
      if (!r.word(&d) || d < 0) PKGPU_FAIL("launch spec: bad dims of buffer %lld",
                                           static_cast<long long>(i));
    }
    k->buffers.push_back(std::move(b));
  }
  int64_t dims[7];
  for (auto& d : dims) {
    if (!r.word(&d) || d < 0 || d > 0xFFFFFFFFLL) PKGPU_FAIL("launch spec: bad launch dims");
  }
  for (int i = 0; i < 3; ++i) {
    k->grid[i] = static_cast<unsigned>(dims[i]);
    k->block[i] = static_cast<unsigned>(dims[3 + i]);
  }
  k->shared_mem = static_cast<unsigned>(dims[6]);
  if (!r.word(&n) || n < 0 || n > 4096) PKGPU_FAIL("launch spec: bad parameter count");
  k->param_offsets.resize(static_cast<size_t>(n));
  if (!r.word(&k->templ_len) || k->templ_len < 0 || k->templ_len > 32768) {
    PKGPU_FAIL("launch spec: parameter bytes exceed 32768");
  }
  for (auto& off : k->param_offsets) {
    int64_t size = 0;
    if (!r.word(&off) || !r.word(&size) || off < 0 || size <= 0 ||
        off + size > k->templ_len) {
      PKGPU_FAIL("launch spec: a parameter lies outside the parameter bytes");
    }
  }
  k->templ.assign(static_cast<size_t>((k->templ_len + 7) / 8), 0);
  if (!r.bytes(k->templ.data(), k->templ_len)) PKGPU_FAIL("launch spec: truncated");
  if (!r.word(&n) || n < 0 || n > 4096) PKGPU_FAIL("launch spec: bad patch count");
  for (int64_t i = 0; i < n; ++i) {
    Patch p;
    if (!r.word(&p.param) || !r.word(&p.buffer) || !r.word(&p.align) || p.param < 0 ||
        p.param >= static_cast<int64_t>(k->param_offsets.size()) || p.buffer < 0 ||
        p.buffer >= k->n_in + k->n_out || p.align < 0 ||
        k->param_offsets[p.param] + 8 > k->templ_len) {
      PKGPU_FAIL("launch spec: bad pointer patch %lld", static_cast<long long>(i));
    }
    k->patches.push_back(p);
  }
  if (!r.done() || !r.ok()) PKGPU_FAIL("launch spec: %s", r.ok() ? "trailing bytes" : "truncated");
  return true;
}

// ---- the buffers of one call, and the launches they make ------------------------
struct View {
  uintptr_t data;
  int64_t dtype;
  int64_t rank;
  const int64_t* dims;
};

struct Plan {
  int64_t batch_rank = 0;
  int64_t batch_shape[kMaxBatchRank] = {};
  int64_t launches = 1;
  // byte stride of each batch axis per buffer (0 for a broadcast or unbatched one)
  int64_t strides[kMaxBuffers][kMaxBatchRank] = {};
};

const char* role(const Kernel& k, int64_t i) { return i < k.n_in ? "input" : "output"; }
long long index_of(const Kernel& k, int64_t i) {
  return static_cast<long long>(i < k.n_in ? i : i - k.n_in);
}

bool plan_batch(const Kernel& k, const View* v, Plan* p, char* err, size_t err_cap) {
  const int64_t nb = k.n_in + k.n_out;
  const BufferSpec& out0 = k.buffers[k.n_in];
  p->batch_rank = v[k.n_in].rank - static_cast<int64_t>(out0.dims.size());
  if (p->batch_rank < 0 || p->batch_rank > kMaxBatchRank) {
    PKGPU_FAIL("%s: output 0 has rank %lld, expected %zu (plus at most %d vmap axes)",
               k.name.c_str(), static_cast<long long>(v[k.n_in].rank), out0.dims.size(),
               kMaxBatchRank);
  }
  for (int64_t a = 0; a < p->batch_rank; ++a) {
    p->batch_shape[a] = v[k.n_in].dims[a];
    p->launches *= p->batch_shape[a];
  }
  for (int64_t i = 0; i < nb; ++i) {
    const BufferSpec& s = k.buffers[i];
    const int64_t want = static_cast<int64_t>(s.dims.size());
    if (v[i].dtype != s.dtype) {
      PKGPU_FAIL("%s: %s %lld has dtype %s, the kernel was compiled for %s",
                 k.name.c_str(), role(k, i), index_of(k, i),
                 pk::dtype_name(static_cast<int>(v[i].dtype)),
                 pk::dtype_name(static_cast<int>(s.dtype)));
    }
    const int64_t extra = v[i].rank - want;
    const bool batched_ok = extra == p->batch_rank || (extra == 0 && i < k.n_in);
    bool dims_ok = batched_ok;
    for (int64_t d = 0; dims_ok && d < want; ++d) dims_ok = v[i].dims[extra + d] == s.dims[d];
    int64_t stride = s.itemsize;
    for (int64_t d : s.dims) stride *= d;
    for (int64_t a = extra - 1; dims_ok && a >= 0; --a) {
      const int64_t n = v[i].dims[a];
      if (n == p->batch_shape[a]) {
        p->strides[i][a] = n == 1 ? 0 : stride;
      } else if (n == 1 && i < k.n_in) {
        p->strides[i][a] = 0;  // broadcast along this vmap axis
      } else {
        dims_ok = false;
      }
      stride *= n;
    }
    if (!dims_ok) {
      char got[256] = "";
      size_t used = 0;
      for (int64_t d = 0; d < v[i].rank && used + 24 < sizeof got; ++d) {
        used += std::snprintf(got + used, sizeof got - used, "%s%lld", d ? ", " : "",
                              static_cast<long long>(v[i].dims[d]));
      }
      char want_s[256] = "";
      used = 0;
      for (int64_t d = 0; d < want && used + 24 < sizeof want_s; ++d) {
        used += std::snprintf(want_s + used, sizeof want_s - used, "%s%lld",
                              d ? ", " : "", static_cast<long long>(s.dims[d]));
      }
      PKGPU_FAIL("%s: %s %lld has shape (%s); the kernel was compiled for (%s) with "
                 "%lld leading vmap axes", k.name.c_str(), role(k, i), index_of(k, i),
                 got, want_s, static_cast<long long>(p->batch_rank));
    }
  }
  return true;
}

// Byte offset of every buffer in launch number `launch` (row-major over the batch).
void batch_offsets(const Kernel& k, const Plan& p, int64_t launch, int64_t* offsets) {
  int64_t index[kMaxBatchRank];
  for (int64_t a = p.batch_rank - 1; a >= 0; --a) {
    index[a] = launch % p.batch_shape[a];
    launch /= p.batch_shape[a];
  }
  for (int64_t i = 0; i < k.n_in + k.n_out; ++i) {
    int64_t off = 0;
    for (int64_t a = 0; a < p.batch_rank; ++a) off += index[a] * p.strides[i][a];
    offsets[i] = off;
  }
}

// The parameter bytes of one launch: the template with every pointer patched in.
bool pack(const Kernel& k, const View* v, const int64_t* offsets, uint64_t* blob,
          char* err, size_t err_cap) {
  std::memcpy(blob, k.templ.data(), static_cast<size_t>(k.templ_len));
  for (const Patch& p : k.patches) {
    const uint64_t ptr = static_cast<uint64_t>(v[p.buffer].data) +
                         static_cast<uint64_t>(offsets[p.buffer]);
    if (p.align > 1 && ptr % static_cast<uint64_t>(p.align) != 0) {
      PKGPU_FAIL("%s: %s %lld is at address %#llx, but the kernel was compiled for "
                 "%lld-byte aligned pointers", k.name.c_str(), role(k, p.buffer),
                 index_of(k, p.buffer), static_cast<unsigned long long>(ptr),
                 static_cast<long long>(p.align));
    }
    std::memcpy(reinterpret_cast<char*>(blob) + k.param_offsets[p.param], &ptr, 8);
  }
  return true;
}

// ---- loading the kernel into a context ------------------------------------------
const Image* pick_image(const Kernel& k, int cc) {
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

CUfunction find_loaded(Kernel& k, CUcontext ctx) {
  const int n = k.n_loaded.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (k.contexts[i] == ctx) return k.functions[i];
  }
  return nullptr;
}

// The kernel's function in `ctx` (current on this thread), loading it on first use.
bool load(Kernel& k, CUcontext ctx, CUfunction* out, char* err, size_t err_cap) {
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
