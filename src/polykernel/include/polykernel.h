// polykernel.h: the contract between user C++/CUDA code and polykernel's generated
// XLA FFI handlers.
//
//   void f(const pk::Tensor& x,   // token "arg"    (input buffer)
//          pk::Tensor& y,         // token "ret"    (output buffer)
//          cudaStream_t stream,   // token "stream" (CUDA only)
//          float alpha);          // token "attr.alpha:float32"
//
// pk::Tensor is a non-owning view of one XLA buffer. data_ptr<T>() checks T against
// the buffer's dtype and throws pk::Error on a mismatch, so a buffer is never read
// with the wrong element type. PK_CHECK(cond, msg) throws (never aborts); the handler
// turns every C++ exception into an XLA FFI error carrying its message.
// pk::parallel_for(begin, end, grain, fn) splits a loop over XLA's intra-op threads.
//
// Only the plain-C FFI API (xla/ffi/api/c_api.h) and a few light C++ headers are
// included: the template-heavy ffi.h and <iostream>/<sstream>/<string> are not, so a
// module compiles in a fraction of a second. Include what your own code uses.
// Messages are formatted with snprintf, never with iostreams.
#ifndef POLYKERNEL_H_
#define POLYKERNEL_H_

#include <sched.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>

#include "xla/ffi/api/c_api.h"

// Keep in step with polykernel.ffi.abi.SUPPORTED_VERSIONS (a test checks it).
#define PK_FFI_API_MIN_MINOR 3
#define PK_FFI_API_MAX_MINOR 5
#if XLA_FFI_API_MAJOR != 0 || XLA_FFI_API_MINOR < PK_FFI_API_MIN_MINOR || \
    XLA_FFI_API_MINOR > PK_FFI_API_MAX_MINOR
#error "polykernel.h supports the XLA FFI C API 0.3-0.5 (jaxlib 0.10-0.12); install jax and jaxlib >=0.10,<0.13"
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

// std::complex without <complex> (which drags in <sstream> and costs ~1 s per
// build): libstdc++ declares it exactly like this; other libraries get the header.
#if defined(__GLIBCXX__)
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
template <typename _Tp>
class complex;
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
#else
#include <complex>
#endif

#if defined(__GNUC__)
#define PK_COLD __attribute__((cold, noinline))
#define PK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PK_COLD
#define PK_PRINTF(f, a)
#endif

namespace pk {

// Error thrown by polykernel checks and PK_CHECK; any std::exception also works.
class Error : public std::exception {
 public:
  explicit Error(const char* message) noexcept { assign(message, std::strlen(message)); }
  // Anything with data() and size(), e.g. std::string, without including <string>.
  template <typename S, typename = decltype(static_cast<const S*>(nullptr)->data() +
                                            static_cast<const S*>(nullptr)->size())>
  explicit Error(const S& message) noexcept {
    assign(message.data(), message.size());
  }
  Error(const Error& other) noexcept : std::exception(other) {
    assign(other.what(), std::strlen(other.what()));
  }
  Error& operator=(const Error& other) noexcept {
    if (this != &other) {
      std::free(text_);
      assign(other.what(), std::strlen(other.what()));
    }
    return *this;
  }
  ~Error() override { std::free(text_); }
  const char* what() const noexcept override {
    return text_ != nullptr ? text_ : "pk::Error (no memory left for its message)";
  }

 private:
  void assign(const char* s, size_t n) noexcept {
    text_ = static_cast<char*>(std::malloc(n + 1));
    if (text_ != nullptr) {
      std::memcpy(text_, s, n);
      text_[n] = '\0';
    }
  }
  char* text_ = nullptr;
};

// Dtype codes are XLA_FFI_DataType values.
// (dtype() returns it; compare with pk::DType::Float32 / BE::DType::Float32, or
// with the integer code.)
enum class DType : int {
  Invalid = 0, Bool = 1, Int8 = 2, Int16 = 3, Int32 = 4, Int64 = 5, UInt8 = 6, UInt16 = 7,
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

inline const char* dtype_name(DType code) { return dtype_name(static_cast<int>(code)); }
// Integer comparisons keep code written against the numeric codes working.
inline bool operator==(DType a, int b) { return static_cast<int>(a) == b; }
inline bool operator==(int a, DType b) { return a == static_cast<int>(b); }
inline bool operator!=(DType a, int b) { return !(a == b); }
inline bool operator!=(int a, DType b) { return !(a == b); }

// Bytes per element (0 for an unknown code).
inline size_t dtype_size(DType code) {
  switch (static_cast<int>(code)) {
    case 1: case 2: case 6: return 1;
    case 3: case 7: case 10: case 16: return 2;
    case 4: case 8: case 11: return 4;
    case 5: case 9: case 12: case 15: return 8;
    case 18: return 16;
    default: return 0;
  }
}

// float16 / bfloat16 storage on the host (C++17 has no half type): 16 raw bits.
// data_ptr<pk::float16_t>() is accepted for a float16 buffer (and bfloat16_t for
// bfloat16); with "polykernel_half.h", data_ptr<__half>() / <__nv_bfloat16>() too.
struct float16_t { uint16_t bits; };
struct bfloat16_t { uint16_t bits; };

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
template <> struct dtype_of<float16_t> { static constexpr int value = 10; };
template <> struct dtype_of<bfloat16_t> { static constexpr int value = 16; };

// printf into a fresh pk::Error (the message is copied, so a stack buffer is fine).
PK_COLD PK_PRINTF(1, 2) inline Error format_error(const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  return Error(text);
}

// The `msg` of PK_CHECK(cond, "a" << n << ...): an iostream-free message builder.
class Message {
 public:
  Message& operator<<(const char* s) { return append(s != nullptr ? s : "(null)"); }
  Message& operator<<(char c) { return put("%c", c); }
  Message& operator<<(signed char c) { return put("%c", c); }
  Message& operator<<(unsigned char c) { return put("%c", c); }
  Message& operator<<(bool b) { return append(b ? "1" : "0"); }
  Message& operator<<(float v) { return put("%g", static_cast<double>(v)); }
  Message& operator<<(double v) { return put("%g", v); }
  Message& operator<<(long double v) { return put("%Lg", v); }
  Message& operator<<(const void* p) { return put("%p", p); }
  Message& operator<<(std::nullptr_t) { return append("nullptr"); }
  template <typename T>
  typename std::enable_if<std::is_integral<T>::value && std::is_signed<T>::value,
                          Message&>::type
  operator<<(T v) { return put("%lld", static_cast<long long>(v)); }
  template <typename T>
  typename std::enable_if<std::is_integral<T>::value && !std::is_signed<T>::value,
                          Message&>::type
  operator<<(T v) { return put("%llu", static_cast<unsigned long long>(v)); }
  template <typename T>
  typename std::enable_if<std::is_enum<T>::value, Message&>::type operator<<(T v) {
    return *this << static_cast<typename std::underlying_type<T>::type>(v);
  }
  template <typename T>
  typename std::enable_if<!std::is_same<typename std::remove_cv<T>::type, char>::value,
                          Message&>::type
  operator<<(T* p) { return *this << static_cast<const void*>(p); }
  // std::string, std::string_view and friends, without including <string>.
  template <typename S, typename = decltype(static_cast<const S*>(nullptr)->data() +
                                            static_cast<const S*>(nullptr)->size())>
  Message& operator<<(const S& s) { return append(s.data(), s.size()); }
  const char* c_str() const { return text_; }

 private:
  PK_PRINTF(2, 3) Message& put(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    const int n = std::vsnprintf(text_ + len_, sizeof text_ - len_, fmt, args);
    va_end(args);
    if (n > 0) len_ = len_ + static_cast<size_t>(n) < sizeof text_ ? len_ + n : sizeof text_ - 1;
    return *this;
  }
  Message& append(const char* s) { return append(s, std::strlen(s)); }
  Message& append(const char* s, size_t n) {
    const size_t room = sizeof text_ - 1 - len_;
    n = n < room ? n : room;
    std::memcpy(text_ + len_, s, n);
    len_ += n;
    text_[len_] = '\0';
    return *this;
  }
  char text_[2048] = {0};
  size_t len_ = 0;
};
}  // namespace detail

class Tensor {
 public:
  Tensor(void* data, int dtype, int64_t ndim, const int64_t* dims, const char* where)
      : data_(data), dtype_(dtype), ndim_(ndim), dims_(dims), where_(where) {}

  // Typed pointer to the data. T must match the buffer dtype exactly (float16 and
  // bfloat16 buffers are read as raw bits with data_ptr_raw16()).
  template <typename T>
  T* data_ptr() const {
    using U = typename std::remove_cv<T>::type;
    static_assert(detail::dtype_of<U>::value > 0,
                  "pk::Tensor::data_ptr<T>: T must be bool, (u)int8..64, float, "
                  "double or std::complex<float/double>");
    if (detail::dtype_of<U>::value != dtype_) {
      throw detail::format_error(
          "%s has dtype %s but the kernel reads it as %s (data_ptr<T>)", where_,
          dtype_name(dtype_), dtype_name(detail::dtype_of<U>::value));
    }
    return static_cast<T*>(data_);
  }

  // float16 / bfloat16 buffers as 16-bit words (C++17 has no portable half type).
  uint16_t* data_ptr_raw16() const {
    if (dtype_ != 10 && dtype_ != 16) {
      throw detail::format_error("%s is not float16/bfloat16 but %s (data_ptr_raw16)",
                                 where_, dtype_name(dtype_));
    }
    return static_cast<uint16_t*>(data_);
  }

  // The untyped pointer (the reference's data_ptr() / data()): no dtype check.
  void* data_ptr() const { return data_; }
  void* data() const { return data_; }

  int64_t ndim() const { return ndim_; }
  DType dtype() const { return static_cast<DType>(dtype_); }
  const char* dtype_str() const { return dtype_name(dtype_); }
  size_t element_size() const { return dtype_size(static_cast<DType>(dtype_)); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }

  // Extent of axis i; negative i counts from the end. Out of range throws.
  int64_t shape(int64_t i) const { return dims_[axis(i, "shape")]; }
  int64_t size(int64_t i) const { return dims_[axis(i, "size")]; }
  const int64_t* shape_ptr() const { return dims_; }

  // Row-major stride of axis i in elements (XLA buffers here are dense).
  int64_t stride(int64_t i) const {
    int64_t s = 1;
    for (int64_t k = axis(i, "stride") + 1; k < ndim_; ++k) s *= dims_[k];
    return s;
  }
  bool is_contiguous() const { return true; }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }

 private:
  int64_t axis(int64_t i, const char* what) const {
    int64_t j = i < 0 ? i + ndim_ : i;
    if (j < 0 || j >= ndim_) {
      throw detail::format_error("%s: %s(%lld) is out of range for rank %lld", where_,
                                 what, static_cast<long long>(i),
                                 static_cast<long long>(ndim_));
    }
    return j;
  }

  void* data_;
  int dtype_;
  int64_t ndim_;
  const int64_t* dims_;
  const char* where_;
};

namespace detail {
// The `stream` argument the generated handler passes: it converts to the parameter
// type the kernel declares, cudaStream_t (polykernel's spelling) or int64_t (the
// reference's, cast back to cudaStream_t in the body).
struct StreamArg {
  void* stream;
#ifdef __CUDACC__
  operator cudaStream_t() const { return static_cast<cudaStream_t>(stream); }
#endif
  operator int64_t() const { return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream)); }
  operator void*() const { return stream; }
};
}  // namespace detail

}  // namespace pk

#define PK_CHECK(cond, msg)                                                  \
  do {                                                                       \
    if (!(cond)) {                                                           \
      ::pk::detail::Message pk_check_msg_;                                   \
      pk_check_msg_ << "PK_CHECK(" #cond ") failed at " << __FILE__ << ":"   \
                    << __LINE__ << ": " << msg;                              \
      throw ::pk::Error(pk_check_msg_.c_str());                              \
    }                                                                        \
  } while (0)

#include "polykernel_ffi.h"
#include "polykernel_parallel.h"
#include "polykernel_be.h"

#endif  // POLYKERNEL_H_
