// The floor of any GPU custom call: a minimal hand-written XLA FFI handler.
//
// bench_gpu.py builds this with nvcc and registers it with JAX directly (no
// polykernel code involved), so the per-call cost of polykernel's GPU kernels can be
// compared with the least a custom call can cost. It is command-buffer compatible,
// like polykernel's handlers, so XLA may capture a chain of them in one CUDA graph.
#include <atomic>
#include <cstdint>

#include <cuda_runtime.h>

#include "add_kernel.cuh"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// How often XLA ran the handler: fewer runs than calls in a chain means XLA
// replayed the chain from a CUDA graph it captured once.
static std::atomic<long long> handler_runs{0};
extern "C" long long floor_handler_runs() { return handler_runs.load(); }

static ffi::Error FloorAddImpl(cudaStream_t stream, ffi::Buffer<ffi::F32> x,
                               ffi::Buffer<ffi::F32> y,
                               ffi::ResultBuffer<ffi::F32> out) {
  handler_runs.fetch_add(1, std::memory_order_relaxed);
  const int64_t n = static_cast<int64_t>(x.element_count());
  const int threads = 256;
  const int64_t blocks = (n + 4 * threads - 1) / (4 * threads);
  if (blocks > 0) {
    add_kernel<<<blocks, threads, 0, stream>>>(x.typed_data(), y.typed_data(),
                                               out->typed_data(), n);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return ffi::Error::Internal(cudaGetErrorString(err));
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(FloorAdd, FloorAddImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>(),
                              {ffi::Traits::kCmdBufferCompatible});
