// plan.h: the buffers of one call and the launches they make. Under jax.vmap the
// buffers carry extra leading batch axes; plan_batch checks them against the spec
// and works out one launch per batch element, batch_offsets gives each buffer's
// offset in a launch, and pack writes that launch's parameter bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "polykernel.h"
#include "spec.h"

namespace pkgpu {

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

inline const char* role(const Kernel& k, int64_t i) {
  return i < k.n_in ? "input" : "output";
}
inline long long index_of(const Kernel& k, int64_t i) {
  return static_cast<long long>(i < k.n_in ? i : i - k.n_in);
}

inline bool plan_batch(const Kernel& k, const View* v, Plan* p, char* err,
                       size_t err_cap) {
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
inline void batch_offsets(const Kernel& k, const Plan& p, int64_t launch,
                          int64_t* offsets) {
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
inline bool pack(const Kernel& k, const View* v, const int64_t* offsets, uint64_t* blob,
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

}  // namespace pkgpu
