/* Numba's numeric helpers (numba/_helperlib.c) that compiled kernels call by
 * name: array reshapes without a copy, and C99 math with Numba's special cases.
 * Same arguments, same results. */
#include <math.h>
#include "pkrt.h"

#define PKRT_MAXDIMS 64 /* NumPy's NPY_MAXDIMS (32 before NumPy 2) */

/* Strides for a reshape of a zero-sized array: any value is valid; Numba's
 * choice, the item size for every axis. */
static int nocopy_empty_reshape(intp newnd, intp *newstrides, intp itemsize) {
    for (intp i = 0; i < newnd; i++)
        newstrides[i] = itemsize;
    return 1;
}

/* numba_attempt_nocopy_reshape (NumPy's _attempt_nocopy_reshape): fill
 * ``newstrides`` and return 1 when the array of ``dims``/``strides`` can take the
 * shape ``newdims`` without a copy, else return 0. */
PKRT_EXPORT int pkrt_attempt_nocopy_reshape(intp nd, const intp *dims,
                                            const intp *strides, intp newnd,
                                            const intp *newdims, intp *newstrides,
                                            intp itemsize, int is_f_order) {
    intp olddims[PKRT_MAXDIMS], oldstrides[PKRT_MAXDIMS];
    intp np_, op, last_stride;
    int oldnd = 0, oi, oj, ni, nj, nk, ok;

    if (nd > PKRT_MAXDIMS)
        return 0; /* more axes than any array has: ask for a copy */
    /* axes of length 1 do not matter (their strides neither) */
    for (oi = 0; oi < nd; oi++) {
        if (dims[oi] != 1) {
            olddims[oldnd] = dims[oi];
            oldstrides[oldnd] = strides[oi];
            oldnd++;
        }
    }
    np_ = 1;
    for (ni = 0; ni < newnd; ni++)
        np_ *= newdims[ni];
    op = 1;
    for (oi = 0; oi < oldnd; oi++)
        op *= olddims[oi];
    if (np_ != op)
        return 0; /* different sizes */
    if (np_ == 0)
        return nocopy_empty_reshape(newnd, newstrides, itemsize);

    /* [oi, oj) and [ni, nj): the axis ranges being matched */
    oi = 0;
    oj = 1;
    ni = 0;
    nj = 1;
    while (ni < newnd && oi < oldnd) {
        np_ = newdims[ni];
        op = olddims[oi];
        while (np_ != op) {
            if (np_ < op)
                np_ *= newdims[nj++]; /* trailing 1s are handled below */
            else
                op *= olddims[oj++];
        }
        /* can the old axes be merged? */
        for (ok = oi; ok < oj - 1; ok++) {
            if (is_f_order) {
                if (oldstrides[ok + 1] != olddims[ok] * oldstrides[ok])
                    return 0;
            } else if (oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]) {
                return 0;
            }
        }
        if (is_f_order) {
            newstrides[ni] = oldstrides[oi];
            for (nk = ni + 1; nk < nj; nk++)
                newstrides[nk] = newstrides[nk - 1] * newdims[nk - 1];
        } else {
            newstrides[nj - 1] = oldstrides[oj - 1];
            for (nk = nj - 1; nk > ni; nk--)
                newstrides[nk - 1] = newstrides[nk] * newdims[nk];
        }
        ni = nj++;
        oi = oj++;
    }
    /* strides of the trailing 1s of the new shape */
    last_stride = ni >= 1 ? newstrides[ni - 1] : itemsize;
    if (is_f_order)
        last_stride *= newdims[ni - 1];
    for (nk = ni; nk < newnd; nk++)
        newstrides[nk] = last_stride;
    return 1;
}

/* frexp/ldexp with the special cases (zero, NaN, infinity) handled here, so
 * every platform agrees. */
PKRT_EXPORT double pkrt_frexp(double x, int *exp) {
    if (!isfinite(x) || !x)
        *exp = 0;
    else
        x = frexp(x, exp);
    return x;
}

PKRT_EXPORT float pkrt_frexpf(float x, int *exp) {
    if (isnan(x) || isinf(x) || !x)
        *exp = 0;
    else
        x = frexpf(x, exp);
    return x;
}

PKRT_EXPORT double pkrt_ldexp(double x, int exp) {
    if (isfinite(x) && x && exp)
        x = ldexp(x, exp);
    return x;
}

PKRT_EXPORT float pkrt_ldexpf(float x, int exp) {
    if (isfinite(x) && x && exp)
        x = ldexpf(x, exp);
    return x;
}

/* C99 math, as Numba redirects it */
PKRT_EXPORT double pkrt_gamma(double x) { return tgamma(x); }
PKRT_EXPORT float pkrt_gammaf(float x) { return tgammaf(x); }
PKRT_EXPORT double pkrt_lgamma(double x) { return lgamma(x); }
PKRT_EXPORT float pkrt_lgammaf(float x) { return lgammaf(x); }
PKRT_EXPORT double pkrt_erf(double x) { return erf(x); }
PKRT_EXPORT float pkrt_erff(float x) { return erff(x); }
PKRT_EXPORT double pkrt_erfc(double x) { return erfc(x); }
PKRT_EXPORT float pkrt_erfcf(float x) { return erfcf(x); }
PKRT_EXPORT double pkrt_nextafter(double a, double b) { return nextafter(a, b); }
PKRT_EXPORT float pkrt_nextafterf(float a, float b) { return nextafterf(a, b); }

/* float -> uint64 through int64 first, so the sign extends as in Numba */
PKRT_EXPORT uint64_t pkrt_fptoui(double x) { return (uint64_t)(int64_t)x; }
PKRT_EXPORT uint64_t pkrt_fptouif(float x) { return (uint64_t)(int64_t)x; }

/* 64-bit division for 32-bit platforms */
PKRT_EXPORT int64_t pkrt_sdiv(int64_t a, int64_t b) { return a / b; }
PKRT_EXPORT uint64_t pkrt_udiv(uint64_t a, uint64_t b) { return a / b; }
PKRT_EXPORT int64_t pkrt_srem(int64_t a, int64_t b) { return a % b; }
PKRT_EXPORT uint64_t pkrt_urem(uint64_t a, uint64_t b) { return a % b; }
