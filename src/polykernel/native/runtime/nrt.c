/* Numba's memory runtime (numba/core/runtime/nrt.cpp): the MemInfo blocks that
 * own the arrays a kernel allocates (np.empty, temporaries of array
 * expressions). The reference counting itself is inlined into the kernel
 * (Numba's NRT_incref/NRT_decref are LLVM IR linked into it); it calls here to
 * allocate and, when a count drops to zero, to destroy.
 *
 * The layout of MemInfo is Numba's, field for field: compiled code reads
 * ``refct`` and ``data`` at their offsets. A handler's arrays never leave it
 * (its outputs are XLA's buffers), so every block is allocated and freed here,
 * with the C allocator. There is no shutdown and there are no statistics: a
 * block is destroyed when its count drops to zero, always. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkrt.h"

typedef void (*pkrt_dtor_fn)(void *ptr, size_t size, void *info);

typedef struct {
    void *(*malloc)(size_t size, void *opaque);
    void *(*realloc)(void *ptr, size_t size, void *opaque);
    void (*free)(void *ptr, void *opaque);
    void *opaque;
} pkrt_allocator; /* NRT_ExternalAllocator */

typedef struct {
    size_t refct; /* atomic: compiled code updates it with atomic add/sub */
    pkrt_dtor_fn dtor;
    void *dtor_info;
    void *data;
    size_t size;
    pkrt_allocator *external_allocator;
} pkrt_meminfo;

static void nrt_fatal(const char *msg) {
    fprintf(stderr, "Fatal polykernel runtime error: %s\n", msg);
    fflush(stderr);
    abort();
}

PKRT_EXPORT void *pkrt_NRT_Allocate_External(size_t size, pkrt_allocator *a) {
    return a ? a->malloc(size, a->opaque) : malloc(size);
}

PKRT_EXPORT void *pkrt_NRT_Allocate(size_t size) { return malloc(size); }

PKRT_EXPORT void *pkrt_NRT_Reallocate(void *ptr, size_t size) {
    return realloc(ptr, size);
}

PKRT_EXPORT void pkrt_NRT_Free(void *ptr) { free(ptr); }

PKRT_EXPORT void pkrt_NRT_MemInfo_init(pkrt_meminfo *mi, void *data, size_t size,
                                       pkrt_dtor_fn dtor, void *dtor_info,
                                       pkrt_allocator *external_allocator) {
    mi->refct = 1; /* starts owned once */
    mi->dtor = dtor;
    mi->dtor_info = dtor_info;
    mi->data = data;
    mi->size = size;
    mi->external_allocator = external_allocator;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_new(void *data, size_t size,
                                               pkrt_dtor_fn dtor, void *info) {
    pkrt_meminfo *mi = malloc(sizeof(pkrt_meminfo));
    if (mi != NULL)
        pkrt_NRT_MemInfo_init(mi, data, size, dtor, info, NULL);
    return mi;
}

/* One block: the MemInfo, then ``size`` bytes of data. */
static void *alloc_with_data(size_t size, pkrt_meminfo **mi, pkrt_allocator *a) {
    char *base = pkrt_NRT_Allocate_External(sizeof(pkrt_meminfo) + size, a);
    *mi = (pkrt_meminfo *)base;
    return base == NULL ? NULL : base + sizeof(pkrt_meminfo);
}

/* As alloc_with_data, the data moved forward to a multiple of ``align`` (2 *
 * align bytes more are allocated, as Numba does). */
static void *alloc_aligned(size_t size, unsigned align, pkrt_meminfo **mi,
                           pkrt_allocator *a) {
    char *base = alloc_with_data(size + 2 * (size_t)align, mi, a);
    if (base == NULL)
        return NULL;
    size_t at = (size_t)base;
    size_t rem = (align & (align - 1)) == 0 ? at & (align - 1) : at % align;
    return base + (rem == 0 ? 0 : align - rem);
}

/* The "safe" (debug) variants mark fresh and freed data, as Numba does. */
static void dtor_safe(void *ptr, size_t size, void *info) {
    (void)info;
    memset(ptr, 0xDE, size);
}

static void custom_dtor_safe(void *ptr, size_t size, void *info) {
    pkrt_dtor_fn dtor = (pkrt_dtor_fn)info;
    if (dtor)
        dtor(ptr, size, NULL);
    dtor_safe(ptr, size, NULL);
}

static void custom_dtor(void *ptr, size_t size, void *info) {
    pkrt_dtor_fn dtor = (pkrt_dtor_fn)info;
    if (dtor)
        dtor(ptr, size, NULL);
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc(size_t size) {
    pkrt_meminfo *mi;
    void *data = alloc_with_data(size, &mi, NULL);
    if (data == NULL)
        return NULL;
    pkrt_NRT_MemInfo_init(mi, data, size, NULL, NULL, NULL);
    return mi;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_external(size_t size,
                                                          pkrt_allocator *a) {
    pkrt_meminfo *mi;
    void *data = alloc_with_data(size, &mi, a);
    if (data == NULL)
        return NULL;
    pkrt_NRT_MemInfo_init(mi, data, size, NULL, NULL, a);
    return mi;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_dtor_safe(size_t size,
                                                           pkrt_dtor_fn dtor) {
    pkrt_meminfo *mi;
    void *data = alloc_with_data(size, &mi, NULL);
    if (data == NULL)
        return NULL;
    memset(data, 0xCB, size);
    pkrt_NRT_MemInfo_init(mi, data, size, custom_dtor_safe, (void *)dtor, NULL);
    return mi;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_safe(size_t size) {
    return pkrt_NRT_MemInfo_alloc_dtor_safe(size, NULL);
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_dtor(size_t size,
                                                      pkrt_dtor_fn dtor) {
    pkrt_meminfo *mi;
    void *data = alloc_with_data(size, &mi, NULL);
    if (data == NULL)
        return NULL;
    pkrt_NRT_MemInfo_init(mi, data, size, custom_dtor, (void *)dtor, NULL);
    return mi;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_aligned(size_t size,
                                                         unsigned align) {
    pkrt_meminfo *mi;
    void *data = alloc_aligned(size, align, &mi, NULL);
    if (data == NULL)
        return NULL;
    pkrt_NRT_MemInfo_init(mi, data, size, NULL, NULL, NULL);
    return mi;
}

static pkrt_meminfo *alloc_safe_aligned(size_t size, unsigned align,
                                        pkrt_allocator *a) {
    pkrt_meminfo *mi;
    void *data = alloc_aligned(size, align, &mi, a);
    if (data == NULL)
        return NULL;
    memset(data, 0xCB, size);
    pkrt_NRT_MemInfo_init(mi, data, size, dtor_safe, (void *)size, a);
    return mi;
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_alloc_safe_aligned(size_t size,
                                                              unsigned align) {
    return alloc_safe_aligned(size, align, NULL);
}

PKRT_EXPORT pkrt_meminfo *
pkrt_NRT_MemInfo_alloc_safe_aligned_external(size_t size, unsigned align,
                                             pkrt_allocator *a) {
    return alloc_safe_aligned(size, align, a);
}

PKRT_EXPORT void pkrt_NRT_dealloc(pkrt_meminfo *mi) {
    if (mi->external_allocator)
        mi->external_allocator->free(mi, mi->external_allocator->opaque);
    else
        free(mi);
}

PKRT_EXPORT void pkrt_NRT_MemInfo_destroy(pkrt_meminfo *mi) { pkrt_NRT_dealloc(mi); }

PKRT_EXPORT void pkrt_NRT_MemInfo_call_dtor(pkrt_meminfo *mi) {
    if (mi->dtor)
        mi->dtor(mi->data, mi->size, mi->dtor_info);
    pkrt_NRT_MemInfo_destroy(mi);
}

PKRT_EXPORT void pkrt_NRT_MemInfo_acquire(pkrt_meminfo *mi) {
    __atomic_add_fetch(&mi->refct, 1, __ATOMIC_SEQ_CST);
}

PKRT_EXPORT void pkrt_NRT_MemInfo_release(pkrt_meminfo *mi) {
    if (__atomic_sub_fetch(&mi->refct, 1, __ATOMIC_SEQ_CST) == 0)
        pkrt_NRT_MemInfo_call_dtor(mi);
}

PKRT_EXPORT void *pkrt_NRT_MemInfo_data(pkrt_meminfo *mi) { return mi->data; }
PKRT_EXPORT size_t pkrt_NRT_MemInfo_size(pkrt_meminfo *mi) { return mi->size; }
PKRT_EXPORT void *pkrt_NRT_MemInfo_parent(pkrt_meminfo *mi) { return mi->dtor_info; }

PKRT_EXPORT void *pkrt_NRT_MemInfo_external_allocator(pkrt_meminfo *mi) {
    return mi->external_allocator;
}

PKRT_EXPORT size_t pkrt_NRT_MemInfo_refcount(pkrt_meminfo *mi) {
    return mi && mi->data ? mi->refct : (size_t)-1;
}

/* Resizable buffers (typed lists, dicts): the data is allocated apart from the
 * MemInfo and freed by its destructor, after the elements' own (``dtor_info``). */
static void varsize_dtor(void *ptr, size_t size, void *info) {
    (void)size;
    if (info)
        ((void (*)(void *))info)(ptr);
    free(ptr);
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_new_varsize(size_t size) {
    void *data = malloc(size);
    if (data == NULL)
        return NULL;
    return pkrt_NRT_MemInfo_new(data, size, varsize_dtor, NULL);
}

PKRT_EXPORT pkrt_meminfo *pkrt_NRT_MemInfo_new_varsize_dtor(size_t size,
                                                            pkrt_dtor_fn dtor) {
    pkrt_meminfo *mi = pkrt_NRT_MemInfo_new_varsize(size);
    if (mi)
        mi->dtor_info = (void *)dtor;
    return mi;
}

PKRT_EXPORT void *pkrt_NRT_MemInfo_varsize_alloc(pkrt_meminfo *mi, size_t size) {
    if (mi->dtor != varsize_dtor)
        nrt_fatal("NRT_MemInfo_varsize_alloc called with a non varsize-allocated "
                  "meminfo");
    mi->data = malloc(size);
    if (mi->data == NULL)
        return NULL;
    mi->size = size;
    return mi->data;
}

PKRT_EXPORT void *pkrt_NRT_MemInfo_varsize_realloc(pkrt_meminfo *mi, size_t size) {
    if (mi->dtor != varsize_dtor)
        nrt_fatal("NRT_MemInfo_varsize_realloc called with a non varsize-allocated "
                  "meminfo");
    mi->data = realloc(mi->data, size);
    if (mi->data == NULL)
        return NULL;
    mi->size = size;
    return mi->data;
}

PKRT_EXPORT void pkrt_NRT_MemInfo_varsize_free(pkrt_meminfo *mi, void *ptr) {
    free(ptr);
    if (ptr == mi->data)
        mi->data = NULL;
}
