// polykernel_half.h: half-precision element types for kernels that want them.
// Not included by polykernel.h: under nvcc it pulls in <cuda_fp16.h> and
// <cuda_bf16.h>, which cost build time every module would otherwise pay.
//
//   pk::half_t / BE::float16_t       __half under nvcc, 16 raw bits on the host
//   pk::bfloat16_storage_t / BE::bfloat16_t   __nv_bfloat16 / 16 raw bits
//   BE_DISPATCH_FLOATING_AND_HALF    float32/float64, plus the halves under nvcc
//
// data_ptr<__half>() and data_ptr<__nv_bfloat16>() are accepted for float16 and
// bfloat16 buffers once this header is included.
#ifndef POLYKERNEL_HALF_H_
#define POLYKERNEL_HALF_H_

#include "polykernel.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pk {
namespace detail {
template <> struct dtype_of<__half> { static constexpr int value = 10; };
template <> struct dtype_of<__nv_bfloat16> { static constexpr int value = 16; };
}  // namespace detail
using half_t = __half;
using bfloat16_storage_t = __nv_bfloat16;
}  // namespace pk

#define BE_DISPATCH_FLOATING_AND_HALF(DTYPE, T, ...)                 \
  PK_BE_DISPATCH("BE_DISPATCH_FLOATING_AND_HALF", DTYPE,             \
                 PK_BE_CASE(Float16, __half, T, __VA_ARGS__)         \
                 PK_BE_CASE(BFloat16, __nv_bfloat16, T, __VA_ARGS__) \
                 PK_BE_CASE(Float32, float, T, __VA_ARGS__)          \
                 PK_BE_CASE(Float64, double, T, __VA_ARGS__))
#else
namespace pk {
using half_t = float16_t;
using bfloat16_storage_t = bfloat16_t;
}  // namespace pk

// On the host, as in the reference, only the float32/float64 cases.
#define BE_DISPATCH_FLOATING_AND_HALF BE_DISPATCH_FLOATING
#endif

namespace BE {
using float16_t = ::pk::half_t;
using bfloat16_t = ::pk::bfloat16_storage_t;
// Complex numbers as pairs, laid out like std::complex.
struct complex64_t {
  float real;
  float imag;
};
struct complex128_t {
  double real;
  double imag;
};
}  // namespace BE

#endif  // POLYKERNEL_HALF_H_
