// polykernel_parallel.h: pk::parallel_for and pk::num_threads on XLA's intra-op
// thread pool (XLA_FFI_ThreadPool_Schedule / _NumThreads). Included by polykernel.h.
//
//   pk::parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi) {
//     for (int64_t i = lo; i < hi; ++i) out[i] = a[i] + b[i];
//   });
//
// fn(lo, hi) is called on disjoint pieces covering [begin, end), each at least
// `grain` long (but the last), from the calling thread and from XLA's pool threads,
// so kernels share XLA's threads instead of oversubscribing the cores. Without a
// pool (no handler running on this thread, a GPU handler, a nested parallel_for or
// a pool of one thread) it is one call fn(begin, end) on the calling thread. The
// calling thread works too and never waits for a task that has not started, so it
// cannot deadlock on a busy pool. An exception thrown by fn stops the pieces not yet
// started and is rethrown on the calling thread.
#ifndef POLYKERNEL_PARALLEL_H_
#define POLYKERNEL_PARALLEL_H_

namespace pk {
namespace detail {

using FfiContext = std::remove_pointer<decltype(XLA_FFI_CallFrame::ctx)>::type;

// The API and context of the handler running on this thread (null outside one).
struct HandlerContext {
  const XLA_FFI_Api* api;
  FfiContext* ctx;
};

inline HandlerContext*& current_handler() {
  static thread_local HandlerContext* current = nullptr;
  return current;
}

// Set by every generated handler around the user's function.
class HandlerScope {
 public:
  explicit HandlerScope(const XLA_FFI_CallFrame* f)
      : self_{f->api, f->ctx}, saved_(current_handler()) {
    current_handler() = &self_;
  }
  ~HandlerScope() { current_handler() = saved_; }
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;

 private:
  HandlerContext self_;
  HandlerContext* saved_;
};

inline void destroy_error(const XLA_FFI_Api* api, XLA_FFI_Error* error) {
  XLA_FFI_Error_Destroy_Args destroy;
  std::memset(&destroy, 0, sizeof destroy);
  destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = error;
  api->XLA_FFI_Error_Destroy(&destroy);
}

inline int64_t pool_threads(const HandlerContext* h) {
  if (h == nullptr || h->ctx == nullptr) return 1;
  int64_t n = 0;
  XLA_FFI_ThreadPool_NumThreads_Args query;
  std::memset(&query, 0, sizeof query);
  query.struct_size = XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE;
  query.ctx = h->ctx;
  query.num_threads = &n;
  if (XLA_FFI_Error* error = h->api->XLA_FFI_ThreadPool_NumThreads(&query)) {
    destroy_error(h->api, error);  // no pool here (e.g. a GPU handler): run serially
    return 1;
  }
  return n > 1 ? n : 1;
}

// One parallel_for, shared by the caller and the pool tasks; reference counted
// because a task may start after the loop is finished (it then does nothing).
struct ParallelJob {
  void (*body)(void* fn, int64_t lo, int64_t hi);
  void* fn;
  int64_t begin, end, chunk, chunks;
  int64_t next;    // next piece to claim (atomic)
  int64_t done;    // pieces finished or skipped (atomic)
  int32_t refs;    // caller + scheduled tasks (atomic)
  int32_t failed;  // an exception was caught (atomic)
  std::exception_ptr error;
};

inline void release(ParallelJob* job) {
  if (__atomic_sub_fetch(&job->refs, 1, __ATOMIC_ACQ_REL) == 0) delete job;
}

inline void run_pieces(ParallelJob* job) {
  for (;;) {
    const int64_t piece = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
    if (piece >= job->chunks) return;
    if (!__atomic_load_n(&job->failed, __ATOMIC_RELAXED)) {
      const int64_t lo = job->begin + piece * job->chunk;
      const int64_t hi = job->end - lo > job->chunk ? lo + job->chunk : job->end;
      try {
        job->body(job->fn, lo, hi);
      } catch (...) {
        if (__atomic_exchange_n(&job->failed, 1, __ATOMIC_ACQ_REL) == 0) {
          job->error = std::current_exception();
        }
      }
    }
    __atomic_add_fetch(&job->done, 1, __ATOMIC_RELEASE);
  }
}

extern "C" inline void polykernel_parallel_task(void* data) {
  auto* job = static_cast<ParallelJob*>(data);
  run_pieces(job);
  release(job);
}

inline bool schedule(const HandlerContext* h, ParallelJob* job) {
  XLA_FFI_ThreadPool_Schedule_Args task;
  std::memset(&task, 0, sizeof task);
  task.struct_size = XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE;
  task.ctx = h->ctx;
  task.task = &polykernel_parallel_task;
  task.data = job;
  if (XLA_FFI_Error* error = h->api->XLA_FFI_ThreadPool_Schedule(&task)) {
    destroy_error(h->api, error);
    return false;
  }
  return true;
}

inline void run_parallel(const HandlerContext* h, int64_t begin, int64_t end,
                         int64_t workers, int64_t pieces,
                         void (*body)(void*, int64_t, int64_t), void* fn) {
  const int64_t n = end - begin;
  const int64_t chunk = n / pieces + (n % pieces != 0);
  auto* job = new ParallelJob{body, fn, begin, end, chunk, n / chunk + (n % chunk != 0),
                              0, 0, 1, 0, nullptr};
  for (int64_t t = 1; t < workers; ++t) {
    __atomic_add_fetch(&job->refs, 1, __ATOMIC_RELAXED);
    if (!schedule(h, job)) {
      release(job);
      break;
    }
  }
  run_pieces(job);
  // Every piece is claimed; wait for the ones running on pool threads.
  while (__atomic_load_n(&job->done, __ATOMIC_ACQUIRE) < job->chunks) sched_yield();
  std::exception_ptr error = job->error;
  release(job);
  if (error) std::rethrow_exception(error);
}

template <typename F>
void invoke_range(void* fn, int64_t lo, int64_t hi) {
  (*static_cast<F*>(fn))(lo, hi);
}

}  // namespace detail

// Threads XLA lets this handler use (1 outside a handler or without a pool).
inline int64_t num_threads() { return detail::pool_threads(detail::current_handler()); }

// Call fn(lo, hi) over disjoint pieces of [begin, end), in parallel on XLA's
// intra-op pool; pieces are at least `grain` long. See the top of this file.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  if (end <= begin) return;
  if (grain < 1) grain = 1;
  const int64_t n = end - begin;
  const int64_t max_pieces = n / grain + (n % grain != 0);
  const detail::HandlerContext* h = detail::current_handler();
  const int64_t threads = max_pieces > 1 ? detail::pool_threads(h) : 1;
  if (threads <= 1) {
    fn(begin, end);
    return;
  }
  using Fn = typename std::remove_reference<F>::type;
  const int64_t workers = threads < max_pieces ? threads : max_pieces;
  // A few pieces per worker balance a pool thread that starts late.
  const int64_t pieces = workers * 4 < max_pieces ? workers * 4 : max_pieces;
  detail::run_parallel(h, begin, end, workers, pieces, &detail::invoke_range<Fn>,
                       const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace pk

#endif  // POLYKERNEL_PARALLEL_H_
