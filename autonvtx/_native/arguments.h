/* Tuples of arguments unpacked directly (arguments.c). */
#ifndef AUTONVTX_ARGUMENTS_H
#define AUTONVTX_ARGUMENTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The items of tuple `t` into the pointers of `out`, one letter of `format` each: U str,
 * l list, d dict, s set, f frozenset (their subclasses too), O anything (PyObject*, borrowed),
 * k an int as unsigned long (its low bits), p its truth as int. 1, or 0 with a TypeError set
 * naming `caller` (another item count, another type). */
int unpack_tuple(const char* caller, PyObject* t, const char* format, void** out);

#endif
