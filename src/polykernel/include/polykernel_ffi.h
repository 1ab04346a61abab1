// polykernel_ffi.h: how polykernel's generated handlers read an XLA_FFI_CallFrame,
// written against the plain-C API (xla/ffi/api/c_api.h) only. Included by
// polykernel.h; user kernels never call it.
//
// A handler answers XLA's metadata query (the API version of the headers it was
// compiled against, and its traits), checks the frame against its signature (stage,
// counts, buffer dtype and rank, attribute names and types) and turns every problem,
// and every C++ exception, into an XLA_FFI_Error carrying a readable message. The
// success path is a handful of loads and compares; message formatting lives in cold,
// out-of-line functions.
#ifndef POLYKERNEL_FFI_H_
#define POLYKERNEL_FFI_H_

#if defined(__GNUC__)
#define PK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PK_UNLIKELY(x) (x)
#endif

namespace pk {
namespace ffi {

using Frame = XLA_FFI_CallFrame;

// printf into an XLA_FFI_Error (XLA copies the message, so the buffer may go away).
PK_COLD PK_PRINTF(3, 4) inline XLA_FFI_Error* errorf(const XLA_FFI_Api* api,
                                                     XLA_FFI_Error_Code code,
                                                     const char* fmt, ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  XLA_FFI_Error_Create_Args create;
  std::memset(&create, 0, sizeof create);
  create.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  create.message = text;
  create.errc = code;
  return api->XLA_FFI_Error_Create(&create);
}

// ---- metadata handshake (once, when jax.ffi.register_ffi_target runs) ----

inline bool is_metadata_query(const Frame* f) {
  return PK_UNLIKELY(f->extension_start != nullptr &&
                     f->extension_start->type == XLA_FFI_Extension_Metadata);
}

PK_COLD inline XLA_FFI_Error* answer_metadata(Frame* f, XLA_FFI_Handler_Traits traits) {
  auto* ext = reinterpret_cast<XLA_FFI_Metadata_Extension*>(f->extension_start);
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      ext->metadata == nullptr ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE) {
    return errorf(f->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "polykernel handler: XLA's metadata query is smaller than the FFI "
                  "headers the module was built with (API %d.%d). Check installed "
                  "software versions.",
                  XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
  }
  XLA_FFI_Metadata* md = ext->metadata;
  md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md->api_version.extension_start = nullptr;
  // The oldest version polykernel supports, whatever headers built the module: the
  // handler reads only what API 0.3 has (as the generated Numba and Warp handlers,
  // which answer 0.3 too), so a module built against jaxlib 0.12 loads under 0.10
  // (a bundle written on one JAX line runs on the others).
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = PK_FFI_API_MIN_MINOR;
  md->traits = traits;
  md->state_type_id.type_id = 0;  // stateless (XLA_FFI_UNKNOWN_TYPE_ID)
  return nullptr;
}

// ---- per call: the frame against the handler's signature ----

PK_COLD inline XLA_FFI_Error* frame_error(const Frame* f, const char* where,
                                          int64_t nargs, int64_t nrets,
                                          const char* attr_names, int64_t nattrs) {
  const XLA_FFI_Api* api = f->api;
  const auto bad = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  if (f->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) {
    return errorf(api, bad, "%s: XLA's call frame has %lld bytes, expected at least "
                  "%lld. Check installed software versions.", where,
                  static_cast<long long>(f->struct_size),
                  static_cast<long long>(XLA_FFI_CallFrame_STRUCT_SIZE));
  }
  if (f->stage != XLA_FFI_ExecutionStage_EXECUTE) {
    return errorf(api, bad, "%s: wrong execution stage %d (the handler only executes)",
                  where, static_cast<int>(f->stage));
  }
  if (f->args.size != nargs || f->rets.size != nrets) {
    return errorf(api, bad, "%s: called with %lld input(s) and %lld output(s), "
                  "expected %lld and %lld", where, static_cast<long long>(f->args.size),
                  static_cast<long long>(f->rets.size), static_cast<long long>(nargs),
                  static_cast<long long>(nrets));
  }
  char got[1024] = "none";
  size_t used = 0;
  for (int64_t i = 0; i < f->attrs.size && used + 1 < sizeof got; ++i) {
    const XLA_FFI_ByteSpan* name = f->attrs.names[i];
    const int n = std::snprintf(got + used, sizeof got - used, "%s%.*s", i ? ", " : "",
                                static_cast<int>(name->len), name->ptr);
    used += n > 0 ? static_cast<size_t>(n) : 0;
  }
  return errorf(api, bad, "%s: called with %lld attribute(s) (%s), expected %lld (%s)",
                where, static_cast<long long>(f->attrs.size), got,
                static_cast<long long>(nattrs), nattrs ? attr_names : "none");
}

inline XLA_FFI_Error* check_frame(const Frame* f, const char* where, int64_t nargs,
                                  int64_t nrets, const char* attr_names,
                                  int64_t nattrs) {
  if (PK_UNLIKELY(f->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE ||
                  f->stage != XLA_FFI_ExecutionStage_EXECUTE ||
                  f->args.size != nargs || f->rets.size != nrets ||
                  f->attrs.size != nattrs)) {
    return frame_error(f, where, nargs, nrets, attr_names, nattrs);
  }
  return nullptr;
}

PK_COLD inline XLA_FFI_Error* buffer_error(const Frame* f, const char* where,
                                           const char* label, int type,
                                           const XLA_FFI_Buffer* b, int dtype,
                                           int64_t rank) {
  const auto bad = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  if (type != XLA_FFI_ArgType_BUFFER) {
    return errorf(f->api, bad, "%s: %s is not a buffer (FFI type %d)", where, label,
                  type);
  }
  if (dtype >= 0 && static_cast<int>(b->dtype) != dtype) {
    return errorf(f->api, bad, "%s: %s has dtype %s, expected %s", where, label,
                  dtype_name(static_cast<int>(b->dtype)), dtype_name(dtype));
  }
  return errorf(f->api, bad, "%s: %s has rank %lld, expected %lld", where, label,
                static_cast<long long>(b->rank), static_cast<long long>(rank));
}

// Input (result == false) or output i; dtype / rank < 0 means "not pinned".
inline XLA_FFI_Error* get_buffer(const Frame* f, bool result, int64_t i, int dtype,
                                 int64_t rank, const char* where, const char* label,
                                 XLA_FFI_Buffer** out) {
  const int type = result ? static_cast<int>(f->rets.types[i])
                          : static_cast<int>(f->args.types[i]);
  auto* b = static_cast<XLA_FFI_Buffer*>(result ? f->rets.rets[i] : f->args.args[i]);
  if (PK_UNLIKELY(type != XLA_FFI_ArgType_BUFFER ||
                  (dtype >= 0 && static_cast<int>(b->dtype) != dtype) ||
                  (rank >= 0 && b->rank != rank))) {
    return buffer_error(f, where, label, type, b, dtype, rank);
  }
  *out = b;
  return nullptr;
}

PK_COLD inline XLA_FFI_Error* attr_error(const Frame* f, int64_t k, const char* name,
                                         int dtype, const char* where) {
  const auto bad = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  const XLA_FFI_ByteSpan* got = f->attrs.names[k];
  if (got->len != std::strlen(name) || std::memcmp(got->ptr, name, got->len) != 0) {
    return errorf(f->api, bad, "%s: expected attribute '%s' but the call passes '%.*s'",
                  where, name, static_cast<int>(got->len), got->ptr);
  }
  if (f->attrs.types[k] != XLA_FFI_AttrType_SCALAR) {
    return errorf(f->api, bad, "%s: attribute '%s' must be a scalar, got FFI attribute "
                  "type %d", where, name, static_cast<int>(f->attrs.types[k]));
  }
  const auto* s = static_cast<const XLA_FFI_Scalar*>(f->attrs.attrs[k]);
  return errorf(f->api, bad, "%s: attribute '%s' has type %s, expected %s", where, name,
                dtype_name(static_cast<int>(s->dtype)), dtype_name(dtype));
}

// Attribute k (XLA sorts attributes by name), checked by name and scalar type.
template <typename T>
inline XLA_FFI_Error* get_scalar(const Frame* f, int64_t k, const char* name,
                                 size_t name_len, int dtype, const char* where,
                                 T* out) {
  const XLA_FFI_ByteSpan* got = f->attrs.names[k];
  const auto* s = static_cast<const XLA_FFI_Scalar*>(f->attrs.attrs[k]);
  if (PK_UNLIKELY(got->len != name_len ||
                  std::memcmp(got->ptr, name, name_len) != 0 ||
                  f->attrs.types[k] != XLA_FFI_AttrType_SCALAR ||
                  static_cast<int>(s->dtype) != dtype)) {
    return attr_error(f, k, name, dtype, where);
  }
  std::memcpy(out, s->value, sizeof(T));
  return nullptr;
}

// The platform stream (CUDA: cudaStream_t) through the API's stream getter.
inline XLA_FFI_Error* get_stream(const Frame* f, void** stream) {
  XLA_FFI_Stream_Get_Args get;
  std::memset(&get, 0, sizeof get);
  get.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  get.ctx = f->ctx;
  if (XLA_FFI_Error* err = f->api->XLA_FFI_Stream_Get(&get)) return err;
  *stream = get.stream;
  return nullptr;
}

// Called from a catch (...) block: the in-flight exception as an FFI error.
PK_COLD inline XLA_FFI_Error* exception_error(const Frame* f, const char* where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return errorf(f->api, XLA_FFI_Error_Code_INTERNAL, "%s: %s", where, e.what());
  } catch (...) {
    return errorf(f->api, XLA_FFI_Error_Code_INTERNAL, "%s: unknown C++ exception",
                  where);
  }
}

}  // namespace ffi
}  // namespace pk

#endif  // POLYKERNEL_FFI_H_
