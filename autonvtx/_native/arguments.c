/*
 * Tuples of arguments unpacked without PyArg_ParseTuple's format parsing: walk_uniform takes
 * two tuples (26 items) once per module of a package targeted wholesale, and parsing their
 * formats cost 3,300 instructions a module (callgrind), a tenth of the Python around the walk.
 */
#include "arguments.h"

#include <string.h>

/* The items of tuple `t` into `out`, one letter of `format` each, as PyArg_ParseTuple's "U",
 * "O", "O!" (l list, d dict, s set, f frozenset), "k" and "p" would take them. */
int unpack_tuple(const char* caller, PyObject* t, const char* format, void** out)
{
    Py_ssize_t n = (Py_ssize_t)strlen(format), i;
    if (PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of %zd items expected, not %zd", caller, n,
                     PyTuple_GET_SIZE(t));
        return 0;
    }
    for (i = 0; i < n; ++i) {
        PyObject* item = PyTuple_GET_ITEM(t, i);
        PyTypeObject* type = NULL;
        switch (format[i]) {
        case 'U': if (!PyUnicode_Check(item)) type = &PyUnicode_Type; break;
        case 'l': if (!PyList_Check(item)) type = &PyList_Type; break;
        case 'd': if (!PyDict_Check(item)) type = &PyDict_Type; break;
        case 's': if (!PySet_Check(item)) type = &PySet_Type; break;
        case 'f': if (!PyFrozenSet_Check(item)) type = &PyFrozenSet_Type; break;
        case 'k':
            if (!PyLong_Check(item)) {
                type = &PyLong_Type;
                break;
            }
            *(unsigned long*)out[i] = PyLong_AsUnsignedLongMask(item);
            if (PyErr_Occurred())
                return 0;
            continue;
        case 'p': {
            int truth = PyObject_IsTrue(item);
            if (truth < 0)
                return 0;
            *(int*)out[i] = truth;
            continue;
        }
        default: break; /* 'O': anything */
        }
        if (type != NULL) {
            PyErr_Format(PyExc_TypeError, "%s: item %zd must be %s, not %.50s", caller, i,
                         type->tp_name, Py_TYPE(item)->tp_name);
            return 0;
        }
        *(PyObject**)out[i] = item;
    }
    return 1;
}
