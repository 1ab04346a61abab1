/* polykernel's runtime library: what Numba-compiled handler code needs from its
 * process, without Numba.
 *
 * A handler linked into a shared object (polykernel.backends.numba) calls Numba's
 * C helpers, its memory runtime (NRT) and its threading layer by name. Those live
 * in Numba's extension modules, which only Numba's JIT can resolve, so the handler
 * is emitted with each of them renamed to the ``pkrt_`` function here, which keeps
 * Numba's ABI and semantics (see each file). Python objects are only touched with
 * the GIL held and only through CPython's stable ABI, declared below rather than
 * included: the library builds without Python headers and one build serves every
 * CPython 3 of the machine.
 *
 * The files are compiled as one translation unit (polykernel.native.runtime).
 */
#ifndef PKRT_H
#define PKRT_H

#define _GNU_SOURCE /* sched_getaffinity: before any system header */
#include <stddef.h>
#include <stdint.h>

#define PKRT_EXPORT __attribute__((visibility("default")))
/* Bumped when a function's ABI or meaning changes (checked when loaded). */
#define PKRT_ABI_VERSION 1

typedef intptr_t intp;
typedef uintptr_t uintp;

/* -- CPython, stable ABI only (the limited API since 3.2) -------------- */
typedef struct _object PyObject;
typedef intptr_t Py_ssize_t;
typedef int PyGILState_STATE; /* an enum in Python.h: int-sized */

extern PyGILState_STATE PyGILState_Ensure(void);
extern void PyGILState_Release(PyGILState_STATE);
extern PyObject *PyImport_ImportModule(const char *);
extern PyObject *PyObject_GetAttrString(PyObject *, const char *);
extern PyObject *PyObject_CallFunctionObjArgs(PyObject *, ...);
extern PyObject *PyBytes_FromStringAndSize(const char *, Py_ssize_t);
extern PyObject *PyLong_FromVoidPtr(void *);
extern PyObject *PyLong_FromLong(long);
extern long PyLong_AsLong(PyObject *);
extern PyObject *PyTuple_GetItem(PyObject *, Py_ssize_t);
extern Py_ssize_t PyTuple_Size(PyObject *);
extern void PyErr_SetObject(PyObject *, PyObject *);
extern void PyErr_SetString(PyObject *, const char *);
extern PyObject *PyErr_Occurred(void);
extern void Py_IncRef(PyObject *);
extern void Py_DecRef(PyObject *);
extern PyObject *PyExc_RuntimeError;

/* Numba's per-thread chunk size (set: to n, returning the old one), where Numba's
 * own threading layer runs here too; (uintp)-1 where it does not (pool.c). */
uintp pkrt_chunksize_of_numba(int set, uintp n);

/* The Python half of the runtime: polykernel.native.runtime.<name> (a new
 * reference, or NULL with an exception set). Call with the GIL held. */
PyObject *pkrt_python_helper(const char *name);

#endif
