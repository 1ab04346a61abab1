// x + y on float32 vectors, 4 floats per thread through float4 loads (XLA's buffers
// are 16-byte aligned): the one kernel of bench_gpu.py's cuda_raw case and of the
// floor handler (ffi_floor.cu), so the two differ only in how they are called.
// Launch with ceil(n / (4 * threads)) blocks.
#include <cstdint>

__global__ void add_kernel(const float* x, const float* y, float* out, int64_t n) {
  int64_t i = 4 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
  if (i + 3 < n) {
    float4 a = *reinterpret_cast<const float4*>(x + i);
    float4 b = *reinterpret_cast<const float4*>(y + i);
    *reinterpret_cast<float4*>(out + i) =
        make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  } else {
    for (int64_t k = i; k < n; ++k) out[k] = x[k] + y[k];
  }
}
