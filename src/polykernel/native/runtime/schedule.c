/* The static schedule of a parfor (Numba's gufunc_scheduler.cpp, its algorithm
 * rewritten in C): how a parallel loop nest's iteration space is cut into one
 * piece per worker (or per chunk). A reduction's partial results are combined in
 * thread order, so the same cut as Numba's is what makes a parallel kernel's
 * result bit-identical to Numba's own run: every rounding below is Numba's
 * (float arithmetic where it uses float), and its sort of the dimensions is
 * libstdc++'s std::sort, which for up to 16 dimensions is a stable insertion
 * sort, as here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pkrt.h"

#define PKRT_MAX_LOOP_DIMS 64

/* Iterations per chunk of a prange (numba.set_parallel_chunksize); per thread.
 * 0: one piece per thread. Numba's own, where it runs here too (pool.c). */
static __thread uintp parallel_chunksize = 0;

PKRT_EXPORT uintp pkrt_set_parallel_chunksize(uintp n) {
    uintp old = pkrt_chunksize_of_numba(1, n);
    if (old != (uintp)-1)
        return old;
    old = parallel_chunksize;
    parallel_chunksize = n;
    return old;
}

PKRT_EXPORT uintp pkrt_get_parallel_chunksize(void) {
    uintp followed = pkrt_chunksize_of_numba(0, 0);
    return followed != (uintp)-1 ? followed : parallel_chunksize;
}

/* The number of pieces the iteration space [starts, ends] (inclusive) is cut in. */
PKRT_EXPORT uintp pkrt_get_sched_size(uintp num_threads, uintp num_dim, intp *starts,
                                      intp *ends) {
    uintp chunksize = pkrt_get_parallel_chunksize();
    if (chunksize == 0)
        return num_threads;
    uintp total = 1;
    for (uintp i = 0; i < num_dim; i++) {
        intp n = ends[i] < starts[i] ? 0 : ends[i] - starts[i] + 1;
        total *= n;
    }
    uintp divisions = total / chunksize;
    return divisions < num_threads ? num_threads : divisions;
}

PKRT_EXPORT intp *pkrt_allocate_sched(uintp sched_size) {
    return malloc(sched_size * sizeof(intp));
}

PKRT_EXPORT void pkrt_deallocate_sched(intp *sched) { free(sched); }

typedef struct {
    uintp dim;
    intp length;
} dimlength;

typedef struct {
    uintp dim;
    intp lower, upper;
} isf_range;

typedef struct {
    uintp ndim;
    const intp *start, *end; /* the full space */
    dimlength dims[PKRT_MAX_LOOP_DIMS]; /* longest first */
    intp *out_start, *out_end;          /* [piece * ndim + dim] */
} space;

/* Numba's guround: round half away from zero. */
static double guround(double x) { return x < 0.0 ? ceil(x - 0.5) : floor(x + 0.5); }

/* The first of ``divisions`` parts of [rs, re]: (a, b, next start). */
static void chunk(intp rs, intp re, intp divisions, intp out[3]) {
    intp len = divisions == 1 ? re - rs + 1 : (re - rs + 1) / divisions;
    out[0] = rs;
    out[1] = rs + len - 1;
    out[2] = rs + len;
}

static void equalizing_chunk(intp rs, intp re, intp divisions, float percent,
                             intp out[3]) {
    intp total = re - rs + 1;
    intp len = divisions == 1 ? total : (intp)((float)total * percent);
    out[0] = rs;
    out[1] = rs + len - 1;
    out[2] = rs + len;
}

/* Store ``build`` (one range per dimension, any order) as piece ``piece``. */
static void assign(space *s, const isf_range *build, uintp piece) {
    for (uintp i = 0; i < s->ndim; i++) {
        uintp d = build[i].dim;
        s->out_start[piece * s->ndim + d] = build[i].lower;
        s->out_end[piece * s->ndim + d] = build[i].upper;
    }
}

/* Numba's divide_work: threads [start_thread, end_thread] take the dimensions
 * from ``index`` on, the longest first, each cut in proportion to its length. */
static void divide_work(space *s, const isf_range *build, uintp start_thread,
                        uintp end_thread, uintp index) {
    isf_range next[PKRT_MAX_LOOP_DIMS];
    uintp num_threads = end_thread - start_thread + 1;
    for (uintp i = 0; i < index; i++)
        next[i] = build[i];
    if (num_threads == 1) {
        if (index == s->ndim) {
            assign(s, build, start_thread);
            return;
        }
        uintp d = s->dims[index].dim;
        next[index] = (isf_range){d, s->start[d], s->end[d]};
        divide_work(s, next, start_thread, end_thread, index + 1);
        return;
    }
    intp total_len = 0;
    for (uintp i = index; i < s->ndim; i++)
        total_len += s->dims[i].length > 1 ? s->dims[i].length : 0;
    uintp divisions;
    if (total_len == 0) {
        divisions = num_threads;
    } else {
        float share = (float)s->dims[index].length / (float)total_len;
        divisions = (uintp)(intp)guround((double)((float)num_threads * share));
        if (divisions < 1)
            divisions = 1;
    }
    uintp d = s->dims[index].dim;
    intp chunkstart = s->start[d], chunkend = s->end[d];
    intp threadstart = (intp)start_thread, threadend = (intp)end_thread;
    for (uintp i = 0; i < divisions; i++) {
        intp threads[3], part[3];
        chunk(threadstart, threadend, (intp)(divisions - i), threads);
        uintp used = (uintp)(1 + (threads[1] - threads[0]));
        equalizing_chunk(chunkstart, chunkend, (intp)(divisions - i),
                         (float)used / (float)num_threads, part);
        num_threads -= used;
        chunkstart = part[2];
        threadstart = threads[2];
        next[index] = (isf_range){d, part[0], part[1]};
        divide_work(s, next, (uintp)threads[0], (uintp)threads[1], index + 1);
    }
}

/* Numba's create_schedule, into out_start/out_end. */
static void create_schedule(space *s, uintp num_sched) {
    for (uintp i = 0; i < num_sched * s->ndim; i++) {
        s->out_start[i] = 1; /* no work: start 1, end 0 */
        s->out_end[i] = 0;
    }
    if (s->ndim == 1) {
        intp len = s->end[0] < s->start[0] ? 0 : s->end[0] - s->start[0] + 1;
        if ((uintp)len <= num_sched) {
            for (uintp i = 0; i < (uintp)len; i++)
                s->out_start[i] = s->out_end[i] = s->start[0] + (intp)i;
            return;
        }
        intp cur = 0;
        for (uintp i = 0; i < num_sched; i++) {
            intp ilen = (intp)((uintp)(len - cur - 1) / (num_sched - i)) + 1;
            s->out_start[i] = s->start[0] + cur;
            /* the last piece takes what is left */
            s->out_end[i] = i < num_sched - 1 ? s->start[0] + cur + ilen - 1
                                              : s->end[0];
            cur += ilen;
        }
        return;
    }
    for (uintp i = 0; i < s->ndim; i++) {
        intp n = s->end[i] < s->start[i] ? 0 : s->end[i] - s->start[i] + 1;
        /* insertion by length, longest first, stable (see the file's comment) */
        uintp j = i;
        while (j > 0 && s->dims[j - 1].length < n) {
            s->dims[j] = s->dims[j - 1];
            j--;
        }
        s->dims[j] = (dimlength){i, n};
    }
    divide_work(s, NULL, 0, num_sched - 1, 0);
}

static int schedule(uintp num_dim, intp *starts, intp *ends, uintp num_threads,
                    intp *sched, int is_signed, intp debug) {
    if (debug) {
        printf("do_scheduling_%s\n", is_signed ? "signed" : "unsigned");
        printf("num_dim = %d\n", (int)num_dim);
        printf("ranges = (");
        for (uintp i = 0; i < num_dim; i++)
            printf("[%d, %d], ", (int)starts[i], (int)ends[i]);
        printf(")\n");
        printf("num_threads = %d\n", (int)num_threads);
    }
    if (num_threads == 0)
        return 0;
    if (num_dim == 0 || num_dim > PKRT_MAX_LOOP_DIMS)
        return -1;
    space s = {.ndim = num_dim, .start = starts, .end = ends};
    s.out_start = malloc(2 * num_threads * num_dim * sizeof(intp));
    if (s.out_start == NULL)
        return -1;
    s.out_end = s.out_start + num_threads * num_dim;
    create_schedule(&s, num_threads);
    for (uintp i = 0; i < num_threads; i++) {
        for (uintp j = 0; j < num_dim; j++) {
            sched[i * num_dim * 2 + j] = s.out_start[i * num_dim + j];
            sched[i * num_dim * 2 + num_dim + j] = s.out_end[i * num_dim + j];
        }
    }
    if (debug) {
        for (uintp i = 0; i < num_threads; i++) {
            printf("sched[%td] = ", (ptrdiff_t)i);
            for (uintp j = 0; j < 2 * num_dim; j++)
                printf("%td ", (ptrdiff_t)sched[i * num_dim * 2 + j]);
            printf("\n");
        }
    }
    free(s.out_start);
    return 0;
}

/* The schedule of ``num_threads`` pieces (get_sched_size's count) of the space
 * [starts, ends] into ``sched``: per piece, its starts then its ends. */
PKRT_EXPORT void pkrt_do_scheduling_signed(uintp num_dim, intp *starts, intp *ends,
                                           uintp num_threads, intp *sched,
                                           intp debug) {
    if (schedule(num_dim, starts, ends, num_threads, sched, 1, debug) != 0) {
        fprintf(stderr, "Fatal polykernel runtime error: cannot schedule a loop nest "
                        "of %d dimensions\n", (int)num_dim);
        abort();
    }
}

PKRT_EXPORT void pkrt_do_scheduling_unsigned(uintp num_dim, intp *starts, intp *ends,
                                             uintp num_threads, uintp *sched,
                                             intp debug) {
    pkrt_do_scheduling_signed(num_dim, starts, ends, num_threads, (intp *)sched,
                              debug);
}
