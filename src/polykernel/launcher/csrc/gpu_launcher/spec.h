// spec.h: a registered kernel and the launch spec it is built from, as encoded
// by polykernel/gpu/layout.py (LaunchSpec.encode). parse_spec checks every count,
// offset and index against the bytes it read, so a bad spec is refused at
// registration instead of corrupting a launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "driver.h"

// Keep in step with polykernel/gpu/layout.py (ABI_VERSION and _MAGIC).
#define PKGPU_ABI_VERSION 1
#define PKGPU_SPEC_MAGIC 0x314C4B50  // "PKL1"

// Format a message into the caller's `err` (capacity `err_cap`) and return false:
// the error convention of every check in the launcher's headers.
#define PKGPU_FAIL(...)                                  \
  do {                                                   \
    std::snprintf(err, err_cap, __VA_ARGS__);            \
    return false;                                        \
  } while (0)

namespace pkgpu {

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

inline bool parse_spec(const uint8_t* data, int64_t len, Kernel* k, char* err,
                       size_t err_cap) {
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

}  // namespace pkgpu
