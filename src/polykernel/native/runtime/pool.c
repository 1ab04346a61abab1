/* The threading layer: Numba's parallel_for and thread counts (numba/np/ufunc/
 * omppool.cpp, the "omp" layer polykernel runs Numba with) on a pool of POSIX
 * threads, so a parallel kernel needs no OpenMP runtime.
 *
 * parallel_for runs a parfor's gufunc once per piece of its schedule; pieces go
 * to a team of ``num_threads`` threads the way OpenMP's static schedule gives
 * them (libgomp: contiguous runs, the first n % t threads one piece more), the
 * caller being thread 0. A reduction's partial results are kept per thread id
 * and combined in id order, so the same assignment as Numba's gives the same
 * bits.
 *
 * Thread safety: XLA calls handlers from several threads at once, and a parallel
 * region may be entered from inside another (a prange kernel calling one).
 * Every region takes its own team from a shared list of idle workers (started
 * on demand, never stopped), so regions neither wait for each other nor share
 * state; the thread id and count are per thread, as in Numba.
 *
 * Thread count: Numba's rule, NUMBA_NUM_THREADS, else the CPUs this process may
 * run on; set_num_threads changes it for the calling thread only, and a team's
 * threads take the count of the region they run. In a process that runs Numba's
 * own layer, the setting is Numba's (pkrt_follow_numba, below). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pkrt.h"

typedef void (*gufunc_fn)(char **args, size_t *dims, size_t *steps, void *data);

typedef struct {
    gufunc_fn fn;
    char **args;
    size_t *dims, *steps;
    void *data;
    size_t arg_len, array_count;
    ptrdiff_t size; /* pieces: dims[0] */
    int num_threads;
    int remaining; /* workers still running; under ``lock`` */
    pthread_mutex_t lock;
    pthread_cond_t done;
} region;

typedef struct worker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    region *job; /* set by the region's caller; NULL when idle */
    int tid;
    struct worker *next; /* in the idle list */
} worker;

static int default_threads = 0;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static __thread int tls_num_threads = 0; /* 0: the default */
static __thread int tls_thread_id = 0;   /* 0 outside any team, as OpenMP's */

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static worker *idle = NULL;
static int fork_handler_set = 0;

static void find_default_threads(void) {
    const char *env = getenv("NUMBA_NUM_THREADS");
    if (env != NULL && *env != '\0') {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end == '\0' && n >= 1 && n <= 1 << 20) {
            default_threads = (int)n;
            return;
        }
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        default_threads = CPU_COUNT(&set);
        return;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    default_threads = online > 0 ? (int)online : 1;
}

/* NUMBA_NUM_THREADS's value for this process (the most a kernel may ask for). */
PKRT_EXPORT int pkrt_default_num_threads(void) {
    pthread_once(&default_once, find_default_threads);
    return default_threads;
}

/* Numba's own threading layer, where it runs in this process too (given once
 * by pkrt_follow_numba): a thread's count of threads and chunk size are then
 * Numba's per-thread settings, read and written there, so numba.set_num_threads
 * and numba.set_parallel_chunksize apply to kernels as when they ran on Numba's
 * layer (XLA runs a small program on its caller's thread). */
typedef struct {
    int (*get_num_threads)(void);
    void (*set_num_threads)(int);
    uintp (*get_chunksize)(void);
    uintp (*set_chunksize)(uintp);
} numba_layer;

static numba_layer followed;
static const numba_layer *numba = NULL; /* &followed once set */
static pthread_mutex_t follow_lock = PTHREAD_MUTEX_INITIALIZER;

PKRT_EXPORT void pkrt_follow_numba(int (*get)(void), void (*set)(int),
                                   uintp (*get_chunk)(void),
                                   uintp (*set_chunk)(uintp)) {
    pthread_mutex_lock(&follow_lock);
    if (numba == NULL && get && set && get_chunk && set_chunk) {
        followed = (numba_layer){get, set, get_chunk, set_chunk};
        __atomic_store_n(&numba, &followed, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&follow_lock);
}

static const numba_layer *numba_here(void) {
    return __atomic_load_n(&numba, __ATOMIC_ACQUIRE);
}

PKRT_EXPORT void pkrt_set_num_threads(int count) {
    const numba_layer *layer = numba_here();
    tls_num_threads = count;
    if (layer != NULL)
        layer->set_num_threads(count);
}

/* Numba declares these two intp-returning in its IR and int-returning in C; an
 * intp result serves both. */
PKRT_EXPORT intp pkrt_get_num_threads(void) {
    const numba_layer *layer = numba_here();
    if (layer != NULL)
        return layer->get_num_threads();
    return tls_num_threads != 0 ? tls_num_threads : pkrt_default_num_threads();
}

uintp pkrt_chunksize_of_numba(int set, uintp n) { /* see pkrt.h */
    const numba_layer *layer = numba_here();
    if (layer == NULL)
        return (uintp)-1;
    return set ? layer->set_chunksize(n) : layer->get_chunksize();
}

PKRT_EXPORT intp pkrt_get_thread_id(void) { return tls_thread_id; }

PKRT_EXPORT int pkrt_abi_version(void) { return PKRT_ABI_VERSION; }

/* Thread ``tid``'s pieces of ``r``, in order: OpenMP's static schedule. */
static void run_share(region *r, int tid) {
    ptrdiff_t n = r->size, t = r->num_threads;
    ptrdiff_t q = n / t, extra = n % t, first;
    if (tid < extra) {
        q++;
        extra = 0;
    }
    first = q * tid + extra;
    size_t count[r->arg_len];
    char *ptrs[r->array_count > 0 ? r->array_count : 1];
    pkrt_set_num_threads(r->num_threads); /* "tell the team the thread count" */
    for (ptrdiff_t i = first; i < first + q; i++) {
        memcpy(count, r->dims, r->arg_len * sizeof(size_t));
        count[0] = 1;
        for (size_t j = 0; j < r->array_count; j++)
            ptrs[j] = r->args[j] + r->steps[j] * (size_t)i;
        r->fn(ptrs, count, r->steps, r->data);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (w->job == NULL)
            pthread_cond_wait(&w->wake, &w->lock);
        region *r = w->job;
        w->job = NULL;
        pthread_mutex_unlock(&w->lock);
        tls_thread_id = w->tid;
        run_share(r, w->tid);
        tls_thread_id = 0;
        pthread_mutex_lock(&r->lock);
        if (--r->remaining == 0)
            pthread_cond_signal(&r->done);
        pthread_mutex_unlock(&r->lock); /* the last touch of ``r`` */
    }
    return NULL;
}

/* A forked child has none of the parent's workers: start afresh (the old
 * records are leaked; they may be mid-update). */
static void after_fork_in_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    idle_lock = fresh;
    idle = NULL;
}

static worker *take_worker(void) {
    pthread_mutex_lock(&idle_lock);
    if (!fork_handler_set) {
        pthread_atfork(NULL, NULL, after_fork_in_child);
        fork_handler_set = 1;
    }
    worker *w = idle;
    if (w != NULL)
        idle = w->next;
    pthread_mutex_unlock(&idle_lock);
    if (w != NULL)
        return w;
    w = calloc(1, sizeof(worker));
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (failed) {
        free(w);
        return NULL;
    }
    return w;
}

static void give_back(worker **team, int n) {
    pthread_mutex_lock(&idle_lock);
    for (int i = n - 1; i >= 0; i--) {
        team[i]->next = idle;
        idle = team[i];
    }
    pthread_mutex_unlock(&idle_lock);
}

/* numba_parallel_for: call ``fn`` once per piece i < dimensions[0], with
 * args[j] advanced by i * steps[j] and a count of 1, on ``num_threads``
 * threads. */
PKRT_EXPORT void pkrt_parallel_for(void *fn, char **args, size_t *dimensions,
                                   size_t *steps, void *data, size_t inner_ndim,
                                   size_t array_count, int num_threads) {
    region r = {.fn = (gufunc_fn)fn, .args = args, .dims = dimensions,
                .steps = steps, .data = data, .arg_len = inner_ndim + 1,
                .array_count = array_count, .size = (ptrdiff_t)dimensions[0],
                .num_threads = num_threads < 1 ? 1 : num_threads};
    int helpers = r.num_threads - 1, started = 0;
    worker *stack_team[64];
    worker **team = helpers <= 64 ? stack_team : malloc(helpers * sizeof(worker *));
    if (team == NULL)
        helpers = 0; /* no memory for a team: the caller runs every share */
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.done, NULL);
    for (; started < helpers; started++) {
        team[started] = take_worker();
        if (team[started] == NULL)
            break; /* no more threads: the caller runs the rest (below) */
    }
    r.remaining = started;
    for (int i = 0; i < started; i++) {
        worker *w = team[i];
        w->tid = i + 1;
        pthread_mutex_lock(&w->lock);
        w->job = &r;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
    }
    /* The caller is thread 0 of the team for the region only: its own id and
     * count (which may follow Numba's, see above) come back after it. */
    int outer_id = tls_thread_id, outer_count = tls_num_threads;
    tls_thread_id = 0;
    run_share(&r, 0);
    /* The shares of threads that could not start, under their ids: the same
     * pieces per id, so the same result, only later. */
    for (int tid = started + 1; tid < r.num_threads; tid++) {
        tls_thread_id = tid;
        run_share(&r, tid);
    }
    tls_thread_id = outer_id;
    tls_num_threads = outer_count;
    pthread_mutex_lock(&r.lock);
    while (r.remaining > 0)
        pthread_cond_wait(&r.done, &r.lock);
    pthread_mutex_unlock(&r.lock);
    give_back(team, started);
    if (team != NULL && team != stack_team)
        free(team);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.done);
}
