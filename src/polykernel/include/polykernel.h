// polykernel.h: the contract between user C++/CUDA code and polykernel's generated
// XLA FFI wrappers.
//
//   void f(const pk::Tensor& x,   // token "arg"    (input buffer)
//          pk::Tensor& y,         // token "ret"    (output buffer)
//          cudaStream_t stream,   // token "stream" (CUDA only)
//          float alpha);          // token "attr.alpha:float32"
//
// pk::Tensor is a non-owning view of one XLA buffer. data_ptr<T>() checks T against
// the buffer's dtype and throws pk::Error on a mismatch, so a buffer is never read
// with the wrong element type. PK_CHECK(cond, msg) throws (never aborts); the wrapper
// turns every C++ exception into an XLA FFI error carrying its message.
#ifndef POLYKERNEL_H_
#define POLYKERNEL_H_

#include <complex>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

// jaxlib's api.h has a switch without a trailing return (-Wreturn-type); harmless.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"
#endif
#include "xla/ffi/api/ffi.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace pk {

// Error thrown by polykernel checks and PK_CHECK; any std::exception also works.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Dtype codes are XLA_FFI_DataType values.
enum class DType : int {
  Bool = 1, Int8 = 2, Int16 = 3, Int32 = 4, Int64 = 5, UInt8 = 6, UInt16 = 7,
  UInt32 = 8, UInt64 = 9, Float16 = 10, Float32 = 11, Float64 = 12,
  Complex64 = 15, BFloat16 = 16, Complex128 = 18,
};

inline const char* dtype_name(int code) {
  switch (code) {
    case 1: return "bool";
    case 2: return "int8";
    case 3: return "int16";
    case 4: return "int32";
    case 5: return "int64";
    case 6: return "uint8";
    case 7: return "uint16";
    case 8: return "uint32";
    case 9: return "uint64";
    case 10: return "float16";
    case 11: return "float32";
    case 12: return "float64";
    case 15: return "complex64";
    case 16: return "bfloat16";
    case 18: return "complex128";
    default: return "unsupported";
  }
}

namespace detail {
template <typename T> struct dtype_of { static constexpr int value = -1; };
template <> struct dtype_of<bool> { static constexpr int value = 1; };
template <> struct dtype_of<int8_t> { static constexpr int value = 2; };
template <> struct dtype_of<int16_t> { static constexpr int value = 3; };
template <> struct dtype_of<int32_t> { static constexpr int value = 4; };
template <> struct dtype_of<int64_t> { static constexpr int value = 5; };
template <> struct dtype_of<uint8_t> { static constexpr int value = 6; };
template <> struct dtype_of<uint16_t> { static constexpr int value = 7; };
template <> struct dtype_of<uint32_t> { static constexpr int value = 8; };
template <> struct dtype_of<uint64_t> { static constexpr int value = 9; };
template <> struct dtype_of<float> { static constexpr int value = 11; };
template <> struct dtype_of<double> { static constexpr int value = 12; };
template <> struct dtype_of<std::complex<float>> { static constexpr int value = 15; };
template <> struct dtype_of<std::complex<double>> { static constexpr int value = 18; };
}  // namespace detail

class Tensor {
 public:
  Tensor(void* data, int dtype, int64_t ndim, const int64_t* dims, const char* where)
      : data_(data), dtype_(dtype), ndim_(ndim), dims_(dims), where_(where) {}

  // Typed pointer to the data. T must match the buffer dtype exactly (float16 and
  // bfloat16 buffers are read as raw bits with data_ptr_raw16()).
  template <typename T>
  T* data_ptr() const {
    using U = std::remove_cv_t<T>;
    static_assert(detail::dtype_of<U>::value > 0,
                  "pk::Tensor::data_ptr<T>: T must be bool, (u)int8..64, float, "
                  "double or std::complex<float/double>");
    if (detail::dtype_of<U>::value != dtype_) {
      std::ostringstream os;
      os << where_ << " has dtype " << dtype_name(dtype_) << " but the kernel reads it"
         << " as " << dtype_name(detail::dtype_of<U>::value) << " (data_ptr<T>)";
      throw Error(os.str());
    }
    return static_cast<T*>(data_);
  }

  // float16 / bfloat16 buffers as 16-bit words (C++17 has no portable half type).
  uint16_t* data_ptr_raw16() const {
    if (dtype_ != 10 && dtype_ != 16) {
      throw Error(std::string(where_) + " is not float16/bfloat16 but " +
                  dtype_name(dtype_) + " (data_ptr_raw16)");
    }
    return static_cast<uint16_t*>(data_);
  }

  int64_t ndim() const { return ndim_; }
  int dtype() const { return dtype_; }
  const char* dtype_str() const { return dtype_name(dtype_); }

  // Extent of axis i; negative i counts from the end. Out of range throws.
  int64_t shape(int64_t i) const {
    int64_t j = i < 0 ? i + ndim_ : i;
    if (j < 0 || j >= ndim_) {
      std::ostringstream os;
      os << where_ << ": shape(" << i << ") is out of range for rank " << ndim_;
      throw Error(os.str());
    }
    return dims_[j];
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }

 private:
  void* data_;
  int dtype_;
  int64_t ndim_;
  const int64_t* dims_;
  const char* where_;
};

}  // namespace pk

#define PK_CHECK(cond, msg)                                                  \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::ostringstream pk_check_os_;                                       \
      pk_check_os_ << "PK_CHECK(" #cond ") failed at " << __FILE__ << ":"    \
                   << __LINE__ << ": " << msg;                               \
      throw ::pk::Error(pk_check_os_.str());                                 \
    }                                                                        \
  } while (0)

#endif  // POLYKERNEL_H_
