// polykernel_be.h: the reference API's C++ spelling, so kernels written for it
// compile unchanged. Included by polykernel.h.
//
//   void scale(const BE::Tensor x, BE::Tensor out, int64_t stream);  // CUDA
//   BE_CHECK(x.ndim() == 1) << "expected a vector, got rank " << x.ndim();
//   BE_DISPATCH_FLOATING(x.dtype(), scalar_t, { run<scalar_t>(x, out); });
//
// BE::Tensor *is* pk::Tensor (data_ptr<T>() still checks the dtype). Where the
// reference aborts the process (a failed BE_CHECK, an unsupported dtype in a
// dispatch, a CUDA error), these throw pk::Error, which the handler returns to
// JAX as a Python exception carrying the message.
#ifndef POLYKERNEL_BE_H_
#define POLYKERNEL_BE_H_

namespace BE {
using ::pk::DType;
using ::pk::Tensor;
using ::pk::dtype_name;
using ::pk::dtype_size;
}  // namespace BE

namespace pk {
namespace detail {
// `Throw() & (message << ...)`: `&` binds looser than `<<`, so the whole
// message is built before the throw.
struct CheckThrow {
  [[noreturn]] PK_COLD void operator&(const Message& m) const { throw Error(m.c_str()); }
};
PK_COLD inline Message check_message(const char* file, int line, const char* cond) {
  Message m;
  m << "BE_CHECK(" << cond << ") failed at " << file << ":" << line << ": ";
  return m;
}
[[noreturn]] PK_COLD inline void unsupported_dtype(const char* macro, DType dtype) {
  throw format_error("%s: unsupported dtype %s", macro, dtype_name(dtype));
}
}  // namespace detail
}  // namespace pk

// BE_CHECK(cond) << "message" << value;  throws pk::Error when cond is false.
#define BE_CHECK(cond)             \
  if (cond) {                      \
  } else                           \
    ::pk::detail::CheckThrow() &   \
        ::pk::detail::check_message(__FILE__, __LINE__, #cond)

#ifdef __CUDACC__
#define BE_CUDA_CHECK(expr)                                                      \
  do {                                                                           \
    cudaError_t pk_cuda_err_ = (expr);                                           \
    if (pk_cuda_err_ != cudaSuccess) {                                           \
      throw ::pk::detail::format_error("CUDA error at %s:%d: %s (%s)", __FILE__, \
                                       __LINE__, cudaGetErrorString(pk_cuda_err_), \
                                       cudaGetErrorName(pk_cuda_err_));          \
    }                                                                            \
  } while (0)
#define BE_CHECK_KERNEL_LAUNCH() BE_CUDA_CHECK(cudaGetLastError())
#endif

// One `case` of a dispatch: the body sees `T` as a type alias.
#define PK_BE_CASE(CODE, CTYPE, T, ...) \
  case ::pk::DType::CODE: {             \
    using T = CTYPE;                    \
    __VA_ARGS__                         \
    break;                              \
  }
#define PK_BE_DISPATCH(NAME, DTYPE, CASES)                          \
  [&] {                                                             \
    const ::pk::DType pk_dispatch_dtype_ = (DTYPE);                 \
    switch (pk_dispatch_dtype_) {                                   \
      CASES                                                         \
      default:                                                      \
        ::pk::detail::unsupported_dtype(NAME, pk_dispatch_dtype_);  \
    }                                                               \
  }()

// The case lists the dispatch macros combine.
#define PK_BE_FLOAT_CASES(T, ...)                  \
  PK_BE_CASE(Float32, float, T, __VA_ARGS__)       \
  PK_BE_CASE(Float64, double, T, __VA_ARGS__)
#define PK_BE_SIGNED_INDEX_CASES(T, ...)           \
  PK_BE_CASE(Int32, int32_t, T, __VA_ARGS__)       \
  PK_BE_CASE(Int64, int64_t, T, __VA_ARGS__)
#define PK_BE_INTEGRAL_CASES(T, ...)               \
  PK_BE_CASE(Bool, bool, T, __VA_ARGS__)           \
  PK_BE_CASE(Int8, int8_t, T, __VA_ARGS__)         \
  PK_BE_CASE(Int16, int16_t, T, __VA_ARGS__)       \
  PK_BE_SIGNED_INDEX_CASES(T, __VA_ARGS__)         \
  PK_BE_CASE(UInt8, uint8_t, T, __VA_ARGS__)       \
  PK_BE_CASE(UInt16, uint16_t, T, __VA_ARGS__)     \
  PK_BE_CASE(UInt32, uint32_t, T, __VA_ARGS__)     \
  PK_BE_CASE(UInt64, uint64_t, T, __VA_ARGS__)

#define BE_DISPATCH_FLOATING(DTYPE, T, ...) \
  PK_BE_DISPATCH("BE_DISPATCH_FLOATING", DTYPE, PK_BE_FLOAT_CASES(T, __VA_ARGS__))
#define BE_DISPATCH_INTEGRAL(DTYPE, T, ...) \
  PK_BE_DISPATCH("BE_DISPATCH_INTEGRAL", DTYPE, PK_BE_INTEGRAL_CASES(T, __VA_ARGS__))
#define BE_DISPATCH_SIGNED_INDEX(DTYPE, T, ...)       \
  PK_BE_DISPATCH("BE_DISPATCH_SIGNED_INDEX", DTYPE,   \
                 PK_BE_SIGNED_INDEX_CASES(T, __VA_ARGS__))
#define BE_DISPATCH_ALL_TYPES(DTYPE, T, ...)            \
  PK_BE_DISPATCH("BE_DISPATCH_ALL_TYPES", DTYPE,        \
                 PK_BE_FLOAT_CASES(T, __VA_ARGS__)      \
                 PK_BE_INTEGRAL_CASES(T, __VA_ARGS__))

#endif  // POLYKERNEL_BE_H_
