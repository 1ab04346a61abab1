/* Numba's exception helpers (numba/_helperlib.c), for raising from handler code.
 *
 * A kernel that raises returns a status pointing at a pickled
 * (exception class, arguments, location) description; the handler, holding the
 * GIL, turns it into a Python exception with these three functions and reads
 * it back (polykernel.ffi.handler_ir). The Python objects are made by the Python
 * half (polykernel.native.runtime): unpickling needs no Numba there, so a
 * process without Numba reports a kernel's exception exactly as Numba would.
 */
#include "pkrt.h"

PyObject *pkrt_python_helper(const char *name) {
    PyObject *module = PyImport_ImportModule("polykernel.native.runtime");
    if (module == NULL)
        return NULL;
    PyObject *fn = PyObject_GetAttrString(module, name);
    Py_DecRef(module);
    return fn;
}

/* numba_gil_ensure / numba_gil_release: the GIL from any thread. */
PKRT_EXPORT void pkrt_gil_ensure(PyGILState_STATE *state) {
    *state = PyGILState_Ensure();
}

PKRT_EXPORT void pkrt_gil_release(PyGILState_STATE *state) {
    PyGILState_Release(*state);
}

/* numba_unpickle: the object pickled in ``data`` (``n`` bytes), memoised by its
 * address and 20-byte SHA-1 ``hashed``, as numba.core.serialize does. */
PKRT_EXPORT PyObject *pkrt_unpickle(const char *data, int n, const char *hashed) {
    PyObject *fn = pkrt_python_helper("unpickle");
    if (fn == NULL)
        return NULL;
    PyObject *obj = NULL, *address = NULL, *buf = NULL, *digest = NULL;
    address = PyLong_FromVoidPtr((void *)data);
    buf = PyBytes_FromStringAndSize(data, n);
    digest = PyBytes_FromStringAndSize(hashed, 20);
    if (address != NULL && buf != NULL && digest != NULL)
        obj = PyObject_CallFunctionObjArgs(fn, address, buf, digest, NULL);
    if (address) Py_DecRef(address);
    if (buf) Py_DecRef(buf);
    if (digest) Py_DecRef(digest);
    Py_DecRef(fn);
    return obj;
}

/* numba_runtime_build_excinfo_struct: the (class, arguments, location) of an
 * exception raised with run-time values, from its pickled compile-time part and
 * the tuple of those values. */
PKRT_EXPORT PyObject *pkrt_build_excinfo_struct(PyObject *static_exc,
                                                PyObject *exc_args) {
    PyObject *fn = pkrt_python_helper("build_excinfo");
    if (fn == NULL)
        return NULL;
    PyObject *obj = PyObject_CallFunctionObjArgs(fn, static_exc, exc_args, NULL);
    Py_DecRef(fn);
    return obj;
}

/* numba_do_raise: raise ``packed`` (an exception class or instance, None to
 * re-raise, or a (class, arguments, location) tuple); consumes a reference.
 * Returns 1 when a class was raised with its arguments, else 0, as Numba does.
 * The Python half applies Numba's rules and hands back (type, value, status);
 * the exception is set here, unnormalised, as PyErr_SetObject does in Numba. */
PKRT_EXPORT int pkrt_do_raise(PyObject *packed) {
    int status = 0;
    PyObject *fn = pkrt_python_helper("raise_args");
    if (fn != NULL) {
        PyObject *got = PyObject_CallFunctionObjArgs(fn, packed, NULL);
        Py_DecRef(fn);
        if (got != NULL) {
            PyObject *type = PyTuple_GetItem(got, 0);
            PyObject *value = PyTuple_GetItem(got, 1);
            PyObject *flag = PyTuple_GetItem(got, 2);
            if (type != NULL && value != NULL && flag != NULL) {
                status = (int)PyLong_AsLong(flag);
                PyErr_SetObject(type, value);
            }
            Py_DecRef(got);
        }
    }
    if (PyErr_Occurred() == NULL)
        PyErr_SetString(PyExc_RuntimeError,
                        "polykernel runtime: the kernel's exception was lost");
    Py_DecRef(packed);
    return status;
}
