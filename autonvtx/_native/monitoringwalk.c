/*
 * The code engine's side of the native walk (uniform.c decides; this applies), Python 3.12+:
 * a plain function the walk selects gets its code's range attached (monitoring.c) and its
 * local events turned on, the functions nested in it too; code of another name is left to
 * where that code is defined, unless a library generated it for this one function.
 */
#include "uniform.h"

#if PY_VERSION_HEX >= 0x030C0000

#include <string.h>

static PyObject* str_wrapped;
static PyObject* frozen_prefix;

static PyObject* reasons_other_name; /* qualname -> "code of another name: it runs ..." */

/* Its local events on, and where `remember`, the code remembered for uninstall
 * (CodeMonitor.monitor_new). */
static int turn_on(walk_state* w, PyObject* code, int remember)
{
    if (!monitoring_turn_on_later((PyCodeObject*)code, w->tool, w->event_bits) &&
        call_back(w->set_local_events, (PyObject*[]){w->tool_id, code, w->events}, 3) < 0)
        return -1;
    return remember ? PyList_Append(w->codes, code) : 0;
}

/* CodeEngine.apply_code with the message "{qualname}" and the code named `qualname`: its
 * range attached, local events on. 1: done, the caller remembers the code for uninstall
 * (report_monitored); 0: it had a range already (the first decision about a code object
 * stands); -1: error. */
static int monitor_code(walk_state* w, PyObject* code)
{
    int done;
    if (monitoring_attached((PyCodeObject*)code))
        return 0;
    /* The module's PendingRange: the code's own Range is made on its first run. */
    done = monitoring_turn_on_pending((PyCodeObject*)code, w->tool, w->event_bits, w->pending_range);
    if (done != 0)
        return done < 0 ? -1 : 1;
    if (monitoring_attach(code, Py_NewRef(w->pending_range)) < 0 || turn_on(w, code, 0) < 0)
        return -1;
    return 1;
}

/* A code monitor_code() monitored, known by its own co_qualname: its entry in the report's
 * list of names wrapped (at `at`, its qualname there now) becomes the code itself, read as
 * its co_qualname (decisions.ModuleReport), and that list is one uninstall reads
 * (CodeMonitor: an entry of the uninstall list, once per module): a function costs one
 * entry, not one in each list. */
static int report_monitored(walk_state* w, Py_ssize_t at, PyObject* code)
{
    PyObject* codes = w->codes;
    Py_ssize_t count = PyList_GET_SIZE(codes);
    if (at >= PyList_GET_SIZE(w->wrapped) || !same_str(PyList_GET_ITEM(w->wrapped, at),
                                                       ((PyCodeObject*)code)->co_qualname))
        return PyList_Append(codes, code); /* the list changed under the walk: kept apart */
    if ((count == 0 || PyList_GET_ITEM(codes, count - 1) != w->wrapped) && PyList_Append(codes, w->wrapped) < 0)
        return -1;
    return PyList_SetItem(w->wrapped, at, Py_NewRef(code));
}

/* The report's entry for a code that runs as its own co_qualname: the code where the walk
 * monitored it now (`monitored`: monitor_code's result), its name where it had a range. */
static int report_code(walk_state* w, PyObject* code, int monitored)
{
    Py_ssize_t at = PyList_GET_SIZE(w->wrapped);
    if (PyList_Append(w->wrapped, ((PyCodeObject*)code)->co_qualname) < 0)
        return -1;
    return monitored == 1 ? report_monitored(w, at, code) : 0;
}

static int defines_code(PyCodeObject* code)
{
    PyObject* consts = code->co_consts;
    Py_ssize_t i;
    for (i = 0; i < PyTuple_GET_SIZE(consts); ++i)
        if (Py_IS_TYPE(PyTuple_GET_ITEM(consts, i), &PyCode_Type))
            return 1;
    return 0;
}

/* ModuleWalk._visit_nested: the functions defined inside `code`, at any depth, outermost
 * first (codes.nested_codes' order), decided by their co_qualname; lambdas and generator
 * expressions (named "<...>") left alone. */
static int visit_nested(walk_state* w, PyCodeObject* code)
{
    /* The codes still to look inside, each held: a few, in a small array (a list's growth
     * where deeper). */
    PyCodeObject* few[16];
    PyCodeObject** pending = few;
    Py_ssize_t count = 0, room = 16;
    int result = 0;
    pending[count++] = (PyCodeObject*)Py_NewRef((PyObject*)code);
    while (count > 0) {
        PyCodeObject* current = pending[--count];
        PyObject* consts = current->co_consts;
        Py_ssize_t i;
        for (i = 0; result == 0 && i < PyTuple_GET_SIZE(consts); ++i) {
            PyCodeObject* inner = (PyCodeObject*)PyTuple_GET_ITEM(consts, i);
            if (!Py_IS_TYPE(inner, &PyCode_Type))
                continue;
            if (count == room) {
                PyCodeObject** grown = PyMem_Malloc((size_t)(2 * room) * sizeof *grown);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    result = -1;
                    break;
                }
                memcpy(grown, pending, (size_t)count * sizeof *grown);
                if (pending != few)
                    PyMem_Free(pending);
                pending = grown;
                room *= 2;
            }
            pending[count++] = (PyCodeObject*)Py_NewRef((PyObject*)inner);
            if (PyUnicode_READ_CHAR(inner->co_name, 0) == '<')
                continue;
            if (is_protocol(w, inner->co_name))
                result = skip_protocol(w, inner->co_qualname);
            else if ((result = monitor_code(w, (PyObject*)inner)) >= 0)
                result = report_code(w, (PyObject*)inner, result);
        }
        Py_DECREF(current); /* its constants, and so `inner`, held by `current` until here */
        if (result < 0)
            break;
    }
    while (count > 0)
        Py_DECREF(pending[--count]);
    if (pending != few)
        PyMem_Free(pending);
    return result;
}

/* codes.generated: compiled from text a library generated (a file name in angle brackets, not
 * a frozen module's): made for one function (dataclasses' `__init__`), which names it. */
static int is_generated(PyCodeObject* code)
{
    PyObject* name = code->co_filename;
    Py_ssize_t length = PyUnicode_GET_LENGTH(name);
    if (length < 2 || PyUnicode_READ_CHAR(name, 0) != '<' || PyUnicode_READ_CHAR(name, length - 1) != '>')
        return 0;
    return PyUnicode_Tailmatch(name, frozen_prefix, 0, length, -1) != 1;
}

/* codes.code_named: the code object that runs as `qualname`, on `func` or along its
 * __wrapped__ chain (functools.wraps); else func's own code when it is no closure of another
 * name. A new reference; NULL, with no error set, when there is none. */
static PyObject* code_named(PyObject* func, PyObject* qualname)
{
    PyObject* own = NULL;
    PyObject* current = Py_NewRef(func);
    int i;
    for (i = 0; i < 100 && current != NULL; ++i) {
        PyObject* next;
        if (Py_IS_TYPE(current, &PyFunction_Type)) {
            PyObject* code = ((PyFunctionObject*)current)->func_code;
            int same = PyCode_Check(code) ? same_str(((PyCodeObject*)code)->co_qualname, qualname) : 0;
            if (same < 0)
                break;
            if (same) {
                Py_XDECREF(own);
                Py_DECREF(current);
                return Py_NewRef(code);
            }
            if (own == NULL && PyCode_Check(code))
                own = Py_NewRef(code);
        }
        next = attribute_or(current, str_wrapped, Py_None);
        Py_SETREF(current, next);
        if (current == Py_None)
            break;
    }
    Py_XDECREF(current);
    if (PyErr_Occurred()) {
        Py_XDECREF(own);
        return NULL;
    }
    if (own != NULL && is_local_name(((PyCodeObject*)own)->co_qualname) && !is_generated((PyCodeObject*)own))
        Py_CLEAR(own);
    return own;
}

/* CodeEngine.apply_code for code run as `qualname` under a name other than its own: a Range
 * with that name, attached now. */
static int monitor_code_as(walk_state* w, PyObject* code, PyObject* qualname)
{
    RangeObject* range;
    if (monitoring_attached((PyCodeObject*)code))
        return 0;
    range = range_new_in_domain(w->domain, w->domain_name, qualname, w->color, w->category);
    if (range == NULL || monitoring_attach(code, (PyObject*)range) < 0)
        return -1;
    return turn_on(w, code, 1);
}

/* The code engine's ModuleWalk._wrap for a plain function known as `qualname`. */
int monitoring_walk_function(walk_state* w, PyObject* func, PyObject* qualname)
{
    PyObject* code = ((PyFunctionObject*)func)->func_code;
    int same = PyCode_Check(code) ? same_str(((PyCodeObject*)code)->co_qualname, qualname) : 0;
    int result;
    Py_ssize_t at;

    if (same < 0)
        return -1;
    if (same)
        Py_INCREF(code);
    else if ((code = code_named(func, qualname)) == NULL) {
        /* A factory's function, or a decorator's wrapper without __wrapped__: decided where
         * its code is defined (ModuleWalk._wrap's skip). */
        PyObject* runs = ((PyFunctionObject*)func)->func_code;
        PyObject* reason;
        if (PyErr_Occurred())
            return -1;
        if (!PyCode_Check(runs))
            return walk_back(w, CB_WRAP, (PyObject*[]){func, qualname}, 2);
        reason = reason_for(&reasons_other_name, "code of another name: it runs %S, decided by that name",
                            ((PyCodeObject*)runs)->co_qualname);
        result = reason == NULL ? -1 : skip(w, qualname, reason);
        Py_XDECREF(reason);
        return result;
    }
    result = defines_code((PyCodeObject*)code) ? visit_nested(w, (PyCodeObject*)code) : 0;
    at = PyList_GET_SIZE(w->wrapped);
    if (result == 0)
        result = PyList_Append(w->wrapped, qualname);
    if (result == 0 && same_str(((PyCodeObject*)code)->co_qualname, qualname) == 1) {
        result = monitor_code(w, code);
        result = result == 1 ? report_monitored(w, at, code) : result;
    }
    else if (result == 0)
        result = monitor_code_as(w, code, qualname);
    Py_DECREF(code);
    return result;
}

int monitoring_walk_ready(void)
{
    if (str_wrapped == NULL && (str_wrapped = PyUnicode_InternFromString("__wrapped__")) == NULL)
        return -1;
    if (frozen_prefix == NULL && (frozen_prefix = PyUnicode_InternFromString("<frozen ")) == NULL)
        return -1;
    return 0;
}

#endif
