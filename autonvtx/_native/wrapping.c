/*
 * The wrap engine's side of the native walk (uniform.c): its table of wrappers (engines/wrap.py,
 * WrapEngine: keyed by engines.key_of), the names waiting for a wrapper, and the writes that bind
 * wrappers in place of functions (remembered for restore() when the engine keeps a list).
 */
#include "uniform.h"

static PyObject* str_wrapped;

/* engines.key_of(value): a plain function itself, anything else its id(); a new reference. */
static PyObject* key_of(PyObject* value)
{
    return Py_IS_TYPE(value, &PyFunction_Type) ? Py_NewRef(value) : PyLong_FromVoidPtr(value);
}

/* WrapEngine.apply for a plain function and the message "{qualname}": its one wrapper, made
 * on first request, and the names that waited for it rebound. */
PyObject* wrapping_apply(walk_state* w, PyObject* func, PyObject* qualname)
{
    PyObject* key = key_of(func);
    PyObject* found;
    PyObject* wrapper;

    if (key == NULL)
        return NULL;
    found = PyDict_GetItemWithError(w->wrappers, key);
    if (found != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(found);
    }
#if PY_VERSION_HEX >= 0x030C0000
    /* 3.12+: WrapEngine.apply ranges coroutine and async generator functions through their
     * code where it can (engines/wrap.py says why). */
    if (((PyCodeObject*)PyFunction_GET_CODE(func))->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR))
        wrapper = Py_NewRef(Py_None);
    else
#endif
    /* Its range is made on its first call: most functions of a package are never called. */
    wrapper = ranged_make_pending(w->wrapper_type, func, w->domain, w->domain_name, qualname,
                                  w->color, w->category);
    if (wrapper == Py_None) { /* not made here: the engine's own path */
        Py_DECREF(wrapper);
        Py_DECREF(key);
        return PyObject_Vectorcall(w->apply, (PyObject*[]){func, qualname}, 2, NULL);
    }
    found = wrapper == NULL ? NULL : PyDict_SetDefault(w->wrappers, key, wrapper);
    Py_XDECREF(wrapper);
    if (found != NULL && PyDict_GET_SIZE(w->pending) > 0) {
        PyObject* waiting = PyDict_GetItemWithError(w->pending, key);
        if (waiting != NULL) {
            Py_INCREF(waiting);
            Py_INCREF(found);
            if (PyDict_DelItem(w->pending, key) < 0 ||
                call_back(w->rebind, (PyObject*[]){func, found, waiting}, 3) < 0)
                Py_CLEAR(found);
            else
                Py_DECREF(found);
            Py_DECREF(waiting);
        } else if (PyErr_Occurred())
            found = NULL;
    }
    Py_DECREF(key);
    return Py_XNewRef(found);
}

/* The engine's existing(value): the wrap engine's wrapper of `value` (a new reference), else
 * NULL, with an error set on failure. */
PyObject* wrapping_existing(walk_state* w, PyObject* value)
{
    PyObject* key;
    PyObject* found;
    PyObject* wrapped;
    if (!w->wrap_mode)
        return NULL; /* a function has none; a builtin goes to Python unless no_existing */
    key = key_of(value);
    if (key == NULL)
        return NULL;
    found = PyDict_GetItemWithError(w->wrappers, key);
    Py_DECREF(key);
    if (found == NULL)
        return NULL;
    /* found.__wrapped__ is value, without wrapt's attribute lookup where the layout is known */
    wrapped = ranged_wrapped_of(found);
    if (wrapped != NULL)
        return wrapped == value ? Py_NewRef(found) : NULL;
    wrapped = PyObject_GetAttr(found, str_wrapped);
    if (wrapped == NULL)
        return NULL;
    Py_DECREF(wrapped);
    return wrapped == value ? Py_NewRef(found) : NULL;
}

/* WrapEngine.bind and set_member: remembered for restore() when it keeps a list. */
int wrapping_put(walk_state* w, PyObject* holder, PyObject* attr, PyObject* value)
{
    if (w->written != Py_None) {
        PyObject* dict = PyDict_Check(holder) ? holder : ((PyTypeObject*)holder)->tp_dict;
        PyObject* old = PyDict_GetItemWithError(dict, attr);
        PyObject* entry;
        int failed;
        if (old == NULL && PyErr_Occurred())
            return -1;
        entry = PyTuple_Pack(4, holder, attr, old != NULL ? old : Py_None, value);
        failed = entry == NULL || PyList_Append(w->written, entry) < 0;
        Py_XDECREF(entry);
        if (failed)
            return -1;
    }
    if (PyDict_Check(holder))
        return PyDict_SetItem(holder, attr, value);
    /* type.__setattr__, not setattr: a metaclass's __setattr__ is the program's code. */
    return PyType_Type.tp_setattro(holder, attr, value);
}

int wrapping_ready(void)
{
    str_wrapped = PyUnicode_InternFromString("__wrapped__");
    return str_wrapped == NULL ? -1 : 0;
}
