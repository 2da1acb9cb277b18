/*
 * The code engine's native half (Python 3.12+, PEP 669): sys.monitoring callbacks that push
 * and pop the Range attached to a code object, and the attachment itself.
 *
 * A Range hangs on its code object as a code extra (PyUnstable_Code_SetExtra, an index this
 * module requests once): the callbacks find it in O(1) from the code object sys.monitoring
 * passes them, and a code object without one (PY_UNWIND and PY_THROW are global events, so
 * every code object's exceptions reach the callback) costs one pointer test. The extra holds a
 * strong reference, released by detach() or when the code object dies (the free function).
 *
 * ranges.CodeMonitor registers monitoring_push for PY_START, PY_RESUME and PY_THROW (a throw
 * resumes a suspended generator) and monitoring_pop for PY_RETURN, PY_YIELD and PY_UNWIND: a
 * range per run of the frame between suspensions, as the wrapper engine gives.
 */
#include "nvtxclient.h"

#if PY_VERSION_HEX >= 0x030C0000

static Py_ssize_t extra_index = -1;

static void release_range(void* extra)
{
    Py_XDECREF((PyObject*)extra);
}

static inline RangeObject* range_of(PyObject* const* args, Py_ssize_t nargs)
{
    void* extra = NULL;
    if (nargs < 1 || !PyCode_Check(args[0]))
        return NULL;
    /* Cannot fail for a code object: a missing slot reads as NULL. */
    (void)PyUnstable_Code_GetExtra(args[0], extra_index, &extra);
    return (RangeObject*)extra;
}

static PyObject* monitoring_push(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    RangeObject* range = range_of(args, nargs);
    (void)module;
    if (range != NULL)
        range_push(range);
    Py_RETURN_NONE;
}

static PyObject* monitoring_pop(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    RangeObject* range = range_of(args, nargs);
    (void)module;
    if (range != NULL)
        range_pop(range);
    Py_RETURN_NONE;
}

static int check_code(PyObject* code, const char* where)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a code object, not %.100s", where,
                     Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject* attach(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "attach(code, range)");
        return NULL;
    }
    if (check_code(args[0], "attach") < 0)
        return NULL;
    if (!Py_IS_TYPE(args[1], &RangeType) || ((RangeObject*)args[1])->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "attach: range must be an initialized Range");
        return NULL;
    }
    Py_INCREF(args[1]);
    /* The previous extra, if any, goes to release_range. */
    if (PyUnstable_Code_SetExtra(args[0], extra_index, args[1]) < 0) {
        Py_DECREF(args[1]);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject* detach(PyObject* module, PyObject* code)
{
    (void)module;
    if (check_code(code, "detach") < 0)
        return NULL;
    if (PyUnstable_Code_SetExtra(code, extra_index, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject* attached(PyObject* module, PyObject* code)
{
    void* extra = NULL;
    (void)module;
    if (check_code(code, "attached") < 0)
        return NULL;
    if (PyUnstable_Code_GetExtra(code, extra_index, &extra) < 0)
        return NULL;
    return Py_NewRef(extra != NULL ? (PyObject*)extra : Py_None);
}

static PyMethodDef monitoring_methods[] = {
    {"monitoring_push", (PyCFunction)(void (*)(void))monitoring_push, METH_FASTCALL,
     "monitoring_push(code, offset, /, *rest)\n--\n\n"
     "sys.monitoring callback: push the Range attached to `code`, if any."},
    {"monitoring_pop", (PyCFunction)(void (*)(void))monitoring_pop, METH_FASTCALL,
     "monitoring_pop(code, offset, /, *rest)\n--\n\n"
     "sys.monitoring callback: pop the Range attached to `code`, if any."},
    {"attach", (PyCFunction)(void (*)(void))attach, METH_FASTCALL,
     "attach(code, range, /)\n--\n\nAttach `range` to `code` (replacing any attached before)."},
    {"detach", (PyCFunction)detach, METH_O,
     "detach(code, /)\n--\n\nRelease the Range attached to `code`, if any."},
    {"attached", (PyCFunction)attached, METH_O,
     "attached(code, /)\n--\n\nThe Range attached to `code`, or None."},
    {NULL, NULL, 0, NULL},
};

int monitoring_add_to_module(PyObject* module)
{
    /* One index per process (this module is single-phase, never re-initialised); there are
     * 255 (MAX_CO_EXTRA_USERS), shared with other users such as debuggers' extensions. */
    if (extra_index < 0) {
        extra_index = PyUnstable_Eval_RequestCodeExtraIndex(release_range);
        if (extra_index < 0) {
            /* No index left: the module still loads; ranges.py reports the code engine
             * unavailable (no monitoring_push attribute). */
            PyErr_Clear();
            return 0;
        }
    }
    return PyModule_AddFunctions(module, monitoring_methods);
}

#else

int monitoring_add_to_module(PyObject* module)
{
    (void)module;
    return 0;
}

#endif
