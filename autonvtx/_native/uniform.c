/* The native walk of a module one rule selects as a whole: uniform.h says what it takes. */
#include "uniform.h"
#include "arguments.h"

#include <string.h>

static PyObject* str_module;
static PyObject* str_qualname;
static PyObject* str_func;
static PyObject* str_locals;
static PyObject* reason_protocol;
static PyObject* reason_c_type;
static PyObject* reason_property;
static PyObject* reason_builtin_member;
static PyObject* reason_builtin;
static PyObject* str_wrapped;

/* A small int of the kinds table, read without PyLong_AsLong's checks. */
static long small_int(PyObject* number)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(number) && PyUnstable_Long_IsCompact((PyLongObject*)number))
        return (long)PyUnstable_Long_CompactValue((PyLongObject*)number);
#endif
    return PyLong_AsLong(number);
}

/* walk.py's _kind(type(value)), -1 on error. */
static long kind_of(walk_state* w, PyObject* value)
{
    PyTypeObject* type = Py_TYPE(value);
    PyObject* found;
    long kind;

    if (type == &PyFunction_Type)
        return K_FUNCTION;
    /* Not a class, nothing callable (no __call__ in its MRO: that sets tp_call) and no
     * descriptor (static and class methods, properties and the method-like all have __get__):
     * what valuekinds.kind_of calls data, told from two slots (most of a module's names: ints,
     * strings, tuples, dictionaries, modules, instances), without a lookup or a call. */
    if (type->tp_call == NULL && type->tp_descr_get == NULL &&
        !PyType_FastSubclass(type, Py_TPFLAGS_TYPE_SUBCLASS))
        return K_DATA;
    found = PyDict_GetItemWithError(w->kinds, (PyObject*)type);
    if (found != NULL)
        return small_int(found);
    if (PyErr_Occurred())
        return -1;
    found = PyObject_CallOneArg(w->kind_of, (PyObject*)type);
    if (found == NULL)
        return -1;
    kind = PyLong_AsLong(found);
    Py_DECREF(found);
    return kind;
}

/* a == b for a str `b`; a non-str `a` is never equal (a module or class names its home with
 * a str). -1 on error. */
int same_str(PyObject* a, PyObject* b)
{
    Py_ssize_t n;
    if (a == b)
        return 1;
    if (a == NULL || !PyUnicode_Check(a))
        return 0;
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b))
        return PyUnicode_Compare(a, b) == 0 ? 1 : (PyErr_Occurred() ? -1 : 0);
    /* Two str: equal when their lengths, kinds and code units are (str keeps each string in
     * its narrowest kind). */
    n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

int optional_attribute(PyObject* value, PyObject* name, PyObject** found)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(value, name, found);
#else
    return _PyObject_LookupAttr(value, name, found);
#endif
}

/* getattr(value, name, default) */
PyObject* attribute_or(PyObject* value, PyObject* name, PyObject* default_value)
{
    PyObject* found;
    if (optional_attribute(value, name, &found) < 0)
        return NULL;
    return found != NULL ? found : Py_NewRef(default_value);
}

/* walk.py's test: a dunder the interpreter calls implicitly (not in WRAPPABLE_DUNDERS). */
int is_protocol(walk_state* w, PyObject* attr)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(attr);
    if (n <= 4 || PyUnicode_READ_CHAR(attr, 0) != '_' || PyUnicode_READ_CHAR(attr, 1) != '_' ||
        PyUnicode_READ_CHAR(attr, n - 1) != '_' || PyUnicode_READ_CHAR(attr, n - 2) != '_')
        return 0;
    return !PySet_Contains(w->dunders, attr);
}

/* "<locals>" in name: a function made by a factory, known by the name it is bound to. */
int is_local_name(PyObject* qualname)
{
    if (PyUnicode_KIND(qualname) == PyUnicode_1BYTE_KIND) {
        /* memchr for each '<' (rare in a name) rather than a general search per name */
        const char* text = (const char*)PyUnicode_DATA(qualname);
        const char* end = text + PyUnicode_GET_LENGTH(qualname);
        const char* found;
        while ((found = memchr(text, '<', (size_t)(end - text))) != NULL) {
            if (end - found >= 8 && memcmp(found, "<locals>", 8) == 0)
                return 1;
            text = found + 1;
        }
        return 0;
    }
    return PyUnicode_Find(qualname, str_locals, 0, PY_SSIZE_T_MAX, 1) >= 0;
}

/* own == f"{qualname}.{attr}", without making that string. */
static int is_member_name(PyObject* own, PyObject* qualname, PyObject* attr)
{
    Py_ssize_t nq = PyUnicode_GET_LENGTH(qualname);
    if (!PyUnicode_CheckExact(own) ||
        PyUnicode_GET_LENGTH(own) != nq + 1 + PyUnicode_GET_LENGTH(attr) ||
        PyUnicode_READ_CHAR(own, nq) != '.')
        return 0;
    if (PyUnicode_KIND(own) == PyUnicode_KIND(qualname) && PyUnicode_KIND(own) == PyUnicode_KIND(attr)) {
        /* One kind (a str is in its narrowest): the code units compared as they are. */
        int kind = PyUnicode_KIND(own);
        const char* data = (const char*)PyUnicode_DATA(own);
        return memcmp(data, PyUnicode_DATA(qualname), (size_t)nq * kind) == 0 &&
               memcmp(data + (nq + 1) * kind, PyUnicode_DATA(attr),
                      (size_t)PyUnicode_GET_LENGTH(attr) * kind) == 0;
    }
    return PyUnicode_Tailmatch(own, qualname, 0, nq, -1) == 1 &&
           PyUnicode_Tailmatch(own, attr, nq + 1, PY_SSIZE_T_MAX, 1) == 1;
}

/* The reason `format` % name, made once per name for the process: a package's skips repeat a
 * few of them hundreds of times (each a 60-100 byte string the report kept). A new reference. */
PyObject* reason_for(PyObject** cache, const char* format, PyObject* name)
{
    PyObject* reason;
    if (!PyUnicode_CheckExact(name))
        return PyUnicode_FromFormat(format, name);
    if (*cache == NULL && (*cache = PyDict_New()) == NULL)
        return NULL;
    reason = PyDict_GetItemWithError(*cache, name);
    if (reason != NULL)
        return Py_NewRef(reason);
    if (PyErr_Occurred() || (reason = PyUnicode_FromFormat(format, name)) == NULL)
        return NULL;
    /* Bounded as valuekinds.KINDS is: names made on the fly are not kept without end. */
    if (PyDict_GET_SIZE(*cache) < 10000 && PyDict_SetItem(*cache, name, reason) < 0)
        Py_CLEAR(reason);
    return reason;
}

static PyObject* reasons_not_plain; /* type name -> "not a plain function: ..." */
static PyObject* reasons_elsewhere; /* module name -> "defined elsewhere: in ..." */

/* vars(cls).get("__module__"), borrowed (the class holds it), else NULL; *known is 0 where the
 * dictionary cannot be read here (the caller asks the Python walk). */
static PyObject* home_of(PyObject* cls, int* known)
{
    PyObject* dict;
    *known = 1;
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyType_HasFeature((PyTypeObject*)cls, Py_TPFLAGS_HEAPTYPE)) {
        PyObject* home;
        /* A static type's dictionary may live in the interpreter's state (3.12's builtins). */
        dict = PyType_GetDict((PyTypeObject*)cls);
        if (dict == NULL) {
            *known = 0;
            return NULL;
        }
        home = PyDict_GetItemWithError(dict, str_module);
        Py_DECREF(dict); /* the type keeps its dictionary, and the dictionary `home` */
        return home;
    }
#endif
    dict = ((PyTypeObject*)cls)->tp_dict;
    if (dict == NULL) {
        *known = 0;
        return NULL;
    }
    return PyDict_GetItemWithError(dict, str_module);
}

/* ModuleReport.skip: appended to the report's list, folded into its dictionary when read. */
int skip(walk_state* w, PyObject* qualname, PyObject* reason)
{
    return PyList_Append(w->skipped, qualname) < 0 ? -1 : PyList_Append(w->skipped, reason);
}

int skip_protocol(walk_state* w, PyObject* qualname)
{
    return skip(w, qualname, reason_protocol);
}

/* The same for `qualname`.`attr`, a class member, without making that name now. */
static int skip_member_named(walk_state* w, PyObject* qualname, PyObject* attr, PyObject* reason)
{
    if (PyList_Append(w->skipped, w->member) < 0 || PyList_Append(w->skipped, qualname) < 0 ||
        PyList_Append(w->skipped, attr) < 0)
        return -1;
    return PyList_Append(w->skipped, reason);
}

/* A dictionary's (key, value) pairs as they are now, each held, in one block: the walk rebinds
 * names as it goes, and a list of (key, value) tuples per namespace and class (what
 * PyDict_Items and dict.items() make) was hundreds of short-lived objects per module, each
 * allocated, tracked by the GC and freed. */
typedef struct {
    Py_ssize_t size;
    PyObject** pairs; /* key, value, key, value, ... */
} snapshot;

static int snapshot_take(PyObject* dict, snapshot* taken)
{
    Py_ssize_t n = PyDict_GET_SIZE(dict), pos = 0, i = 0;
    PyObject *key, *value;
    taken->size = 0;
    taken->pairs = PyMem_Malloc((size_t)(2 * n + 1) * sizeof(PyObject*));
    if (taken->pairs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    while (i < n && PyDict_Next(dict, &pos, &key, &value)) { /* runs no Python code */
        taken->pairs[2 * i] = Py_NewRef(key);
        taken->pairs[2 * i + 1] = Py_NewRef(value);
        ++i;
    }
    taken->size = i;
    return 0;
}

static void snapshot_release(snapshot* taken)
{
    Py_ssize_t i;
    for (i = 0; i < 2 * taken->size; ++i)
        Py_DECREF(taken->pairs[i]);
    PyMem_Free(taken->pairs);
}

int call_back(PyObject* callable, PyObject** args, size_t nargs)
{
    PyObject* done = PyObject_Vectorcall(callable, args, nargs, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* ModuleWalk._wrap for a plain function known as `qualname`: what to bind in its place (a
 * new reference: the wrap engine's wrapper, or None when nothing is to be bound), NULL on
 * error. */
static PyObject* decide_function(walk_state* w, PyObject* func, PyObject* qualname)
{
    if (w->wrap_mode) {
        if (PyList_Append(w->wrapped, qualname) < 0)
            return NULL;
        return wrapping_apply(w, func, qualname);
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (monitoring_walk_function(w, func, qualname) < 0)
        return NULL;
#endif
    Py_RETURN_NONE;
}

PyObject* take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *traceback;
    PyErr_Fetch(&type, &exc, &traceback);
    PyErr_NormalizeException(&type, &exc, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(exc, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return exc;
#endif
}

void raise_exception(PyObject* exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject*)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* An error while deciding about `where`: reported as the Python walk reports it (only
 * Exception: KeyboardInterrupt and the like propagate). */
static int report_failure(walk_state* w, PyObject* where)
{
    PyObject* exc;
    int result;
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    exc = take_exception();
    result = walk_back(w, CB_FAILED, (PyObject*[]){where, exc}, 2);
    Py_DECREF(exc);
    return result;
}

static int visit_class(walk_state* w, PyObject* cls, PyObject* qualname);

/* cls.attr = stand_in, made a static or class method again (`rewrap`); steals stand_in. */
static int set_stand_in(walk_state* w, PyObject* cls, PyObject* attr, PyObject* stand_in, PyObject* rewrap)
{
    int result;
    if (rewrap != NULL)
        Py_SETREF(stand_in, PyObject_CallOneArg(rewrap, stand_in));
    if (stand_in == NULL)
        return -1;
    result = wrapping_put(w, cls, attr, stand_in);
    Py_DECREF(stand_in);
    return result;
}

/* ModuleWalk._visit_member for a plain function, or a static or class method of one
 * (`rewrap`: staticmethod or classmethod, else NULL). */
static int visit_function_member(walk_state* w, PyObject* cls, PyObject* attr, PyObject* func,
                                 PyObject* qualname, PyObject* rewrap)
{
    PyObject* own = ((PyFunctionObject*)func)->func_qualname;
    PyObject* home = ((PyFunctionObject*)func)->func_module;
    PyObject* member = NULL;
    PyObject* stand_in;
    int result, same;

    if (is_protocol(w, attr))
        return skip_member_named(w, qualname, attr, reason_protocol);
    stand_in = wrapping_existing(w, func);
    if (stand_in != NULL)
        return set_stand_in(w, cls, attr, stand_in, rewrap);
    if (PyErr_Occurred())
        return -1;
    same = same_str(home, w->name);
    if (same < 0)
        return -1;
    if (!same && !is_member_name(own, qualname, attr)) {
        PyObject* reason = reason_for(&reasons_elsewhere, "defined elsewhere: in %S", home ? home : Py_None);
        result = reason == NULL ? -1 : skip_member_named(w, qualname, attr, reason);
        Py_XDECREF(reason);
        return result;
    }
    if (!PyUnicode_CheckExact(own) || is_local_name(own)) {
        member = PyUnicode_FromFormat("%U.%U", qualname, attr);
        if (member == NULL)
            return -1;
        own = member;
    }
    stand_in = decide_function(w, func, own);
    Py_XDECREF(member);
    if (stand_in == NULL)
        return -1;
    if (stand_in == Py_None) {
        Py_DECREF(stand_in);
        return 0;
    }
    return set_stand_in(w, cls, attr, stand_in, rewrap);
}

/* ModuleWalk._visit_other_member for what is never wrapped: properties, builtin methods,
 * other callables and method-like descriptors, each skipped with its reason. */
static int skip_member(walk_state* w, PyObject* qualname, PyObject* attr, PyObject* raw, long kind)
{
    PyObject* reason = NULL;
    int result = -1;
    if (kind == K_PROPERTY)
        reason = Py_NewRef(reason_property);
    else if (kind == K_BUILTIN)
        reason = Py_NewRef(reason_builtin_member);
    else {
#if PY_VERSION_HEX >= 0x030B0000
        PyObject* type_name = PyType_GetName(Py_TYPE(raw));
#else
        PyObject* type_name = PyObject_GetAttrString((PyObject*)Py_TYPE(raw), "__name__");
#endif
        if (type_name != NULL)
            reason = reason_for(&reasons_not_plain, "not a plain function: %S", type_name);
        Py_XDECREF(type_name);
    }
    if (reason != NULL)
        result = skip_member_named(w, qualname, attr, reason);
    Py_XDECREF(reason);
    return result;
}

/* One member of a class: what C decides, or ModuleWalk._visit_member. */
static int visit_member(walk_state* w, PyObject* cls, PyObject* attr, PyObject* raw, PyObject* qualname)
{
    long kind = kind_of(w, raw);
    PyObject* func;
    int result;

    if (kind < 0)
        return -1;
    if (kind == K_DATA)
        return 0;
    if (!PyUnicode_CheckExact(attr))
        goto in_python;
    if (kind == K_FUNCTION && Py_IS_TYPE(raw, &PyFunction_Type))
        return visit_function_member(w, cls, attr, raw, qualname, NULL);
    if (kind == K_STATIC_OR_CLASS) {
        func = PyObject_GetAttr(raw, str_func);
        if (func == NULL)
            return -1;
        result = Py_IS_TYPE(func, &PyFunction_Type)
                     ? visit_function_member(w, cls, attr, func, qualname, (PyObject*)Py_TYPE(raw))
                     : 1;
        Py_DECREF(func);
        if (result <= 0)
            return result;
    }
    if (kind == K_CLASS && PyType_Check(raw)) {
        int known;
        PyObject* home = home_of(raw, &known);
        PyObject* own;
        if (!known)
            goto in_python;
        if (home == NULL && PyErr_Occurred())
            return -1;
        if (same_str(home, w->name) != 1)
            return PyErr_Occurred() ? -1 : 0;
        own = PyObject_GetAttr(raw, str_qualname);
        if (own == NULL)
            return -1;
        result = is_member_name(own, qualname, attr) ? visit_class(w, raw, own) : 0;
        Py_DECREF(own);
        return result;
    }
    if (kind == K_PROPERTY || kind == K_BUILTIN || kind == K_OTHER_CALLABLE)
        return skip_member(w, qualname, attr, raw, kind);
in_python:
    {
        PyObject* kind_obj = PyLong_FromLong(kind);
        if (kind_obj == NULL)
            return -1;
        result = walk_back(w, CB_VISIT_MEMBER, (PyObject*[]){cls, attr, raw, kind_obj, qualname}, 5);
        Py_DECREF(kind_obj);
        return result;
    }
}

/* ModuleWalk._visit_class for a class written in Python (heap type). */
static int visit_class(walk_state* w, PyObject* cls, PyObject* qualname)
{
    PyObject* id = PyLong_FromVoidPtr(cls);
    snapshot members;
    Py_ssize_t i;
    int seen;

    if (id == NULL)
        return -1;
    seen = PySet_Contains(w->classes_seen, id);
    if (seen != 0 || PySet_Add(w->classes_seen, id) < 0) {
        Py_DECREF(id);
        return seen > 0 ? 0 : -1;
    }
    Py_DECREF(id);
    if (!PyType_HasFeature((PyTypeObject*)cls, Py_TPFLAGS_HEAPTYPE))
        return skip(w, qualname, reason_c_type);
    if (snapshot_take(((PyTypeObject*)cls)->tp_dict, &members) < 0)
        return -1;
    for (i = 0; i < members.size; ++i) {
        PyObject* attr = members.pairs[2 * i];
        PyObject* raw = members.pairs[2 * i + 1];
        PyObject* where;
        if (visit_member(w, cls, attr, raw, qualname) == 0)
            continue;
        where = PyUnicode_FromFormat("%U.%S", qualname, attr);
        if (where == NULL || report_failure(w, where) < 0) {
            Py_XDECREF(where);
            goto error;
        }
        Py_DECREF(where);
    }
    snapshot_release(&members);
    return 0;
error:
    snapshot_release(&members);
    return -1;
}

/* A builtin defined in the module, under a rule that leaves builtins out (and nothing wrapped
 * yet that it could be a re-export of): skipped, as ModuleWalk._wrap(builtin=True) says. */
static int skip_builtin(walk_state* w, PyObject* attr, PyObject* value)
{
    PyObject* home = attribute_or(value, str_module, Py_None);
    PyObject* qualname;
    int same, result;
    if (home == NULL)
        return -1;
    same = PyObject_RichCompareBool(home, w->name, Py_EQ);
    Py_DECREF(home);
    if (same <= 0)
        return same;
    qualname = attribute_or(value, str_qualname, attr);
    if (qualname == NULL)
        return -1;
    result = skip(w, qualname, reason_builtin);
    Py_DECREF(qualname);
    return result;
}

/* One name of the module: ModuleWalk._visit_global, in C for plain functions and classes. */
static int visit_global(walk_state* w, PyObject* attr, PyObject* value, long kind)
{
    if (w->wrap_mode && (kind == K_FUNCTION || kind == K_BUILTIN) && PyUnicode_CheckExact(attr)) {
        /* A re-export (or alias) of a function already wrapped at its definition site. */
        PyObject* stand_in = wrapping_existing(w, value);
        int result;
        if (stand_in == NULL && PyErr_Occurred())
            return -1;
        if (stand_in != NULL) {
            result = wrapping_put(w, w->namespace, attr, stand_in) < 0 ? -1 : PyList_Append(w->rebound, attr);
            Py_DECREF(stand_in);
            return result;
        }
    }
    if (kind == K_FUNCTION && Py_IS_TYPE(value, &PyFunction_Type) && PyUnicode_CheckExact(attr)) {
        PyFunctionObject* func = (PyFunctionObject*)value;
        PyObject* qualname = func->func_qualname;
        PyObject* stand_in;
        int same = same_str(func->func_module, w->name), result;
        if (same < 0)
            return -1;
        if (!same) /* imported: decided where it is defined, rebound then (the wrap engine) */
            return w->wrap_mode ? walk_back(w, CB_REMEMBER, (PyObject*[]){value, func->func_module, attr}, 3) : 0;
        if (!PyUnicode_CheckExact(qualname) || is_local_name(qualname))
            qualname = attr;
        if (is_protocol(w, attr))
            return skip(w, qualname, reason_protocol);
        stand_in = decide_function(w, value, qualname);
        if (stand_in == NULL)
            return -1;
        result = stand_in == Py_None ? 0 : wrapping_put(w, w->namespace, attr, stand_in);
        Py_DECREF(stand_in);
        return result;
    }
    if (kind == K_CLASS && PyType_Check(value)) {
        /* A class written in Python, or a C type (re-exported builtins, Cython's classes):
         * visit_class skips the latter with its reason. */
        int known;
        PyObject* home = home_of(value, &known);
        PyObject* qualname;
        int result;
        if (!known)
            goto in_python;
        if (home == NULL && PyErr_Occurred())
            return -1;
        result = same_str(home, w->name);
        if (result <= 0)
            return result;
        qualname = PyObject_GetAttr(value, str_qualname);
        if (qualname == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
        }
        if (qualname == NULL || !PyUnicode_Check(qualname) || is_local_name(qualname))
            Py_XSETREF(qualname, Py_NewRef(attr));
        result = visit_class(w, value, qualname);
        Py_DECREF(qualname);
        return result;
    }
    if (kind == K_BUILTIN && (w->wrap_mode || w->no_existing) && !w->builtins && PyUnicode_CheckExact(attr))
        return skip_builtin(w, attr, value);
in_python:
    {
        PyObject* kind_obj = PyLong_FromLong(kind);
        int result;
        if (kind_obj == NULL)
            return -1;
        result = walk_back(w, CB_VISIT_GLOBAL, (PyObject*[]){attr, value, kind_obj}, 3);
        Py_DECREF(kind_obj);
        return result;
    }
}

/* One (name, value) of the module, held by the caller. */
static int walk_item(walk_state* w, PyObject* attr, PyObject* value)
{
    long kind = kind_of(w, value);
    if (kind == -1 && PyErr_Occurred())
        return -1;
    if (kind == K_DATA || kind >= K_STATIC_OR_CLASS)
        return 0; /* data, modules, instances: most of a module's names */
    if (visit_global(w, attr, value, kind) < 0 && report_failure(w, attr) < 0)
        return -1;
    return 0;
}

/* A namespace: its pairs as they are now. */
static int walk_namespace(walk_state* w, PyObject* namespace)
{
    snapshot items;
    Py_ssize_t i;
    int result = 0;
    if (snapshot_take(namespace, &items) < 0)
        return -1;
    for (i = 0; result == 0 && i < items.size; ++i)
        result = walk_item(w, items.pairs[2 * i], items.pairs[2 * i + 1]);
    snapshot_release(&items);
    return result;
}

static int walk_items(walk_state* w, PyObject* items)
{
    Py_ssize_t i;
    if (PyDict_Check(items))
        return walk_namespace(w, items);
    for (i = 0; i < PyList_GET_SIZE(items); ++i) {
        PyObject* item = PyList_GET_ITEM(items, i);
        PyObject *attr, *value;
        long kind;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "walk_uniform: items must be (name, value) pairs");
            return -1;
        }
        attr = PyTuple_GET_ITEM(item, 0);
        value = PyTuple_GET_ITEM(item, 1);
        kind = kind_of(w, value);
        if (kind == -1 && PyErr_Occurred())
            return -1;
        if (kind == K_DATA || kind >= K_STATIC_OR_CLASS)
            continue; /* data, modules, instances: most of a module's names */
        Py_INCREF(attr);
        Py_INCREF(value);
        if (visit_global(w, attr, value, kind) < 0 && report_failure(w, attr) < 0) {
            Py_DECREF(attr);
            Py_DECREF(value);
            return -1;
        }
        Py_DECREF(attr);
        Py_DECREF(value);
    }
    return 0;
}

PyDoc_STRVAR(walk_uniform_doc,
"walk_uniform(application, items, decisions, /)\n--\n\n"
"Walk a module's (name, value) `items` (a list, or a namespace: its pairs as they are now)\n"
"that one rule selects as a whole: decide and monitor\n"
"plain functions and the members of classes written in Python in C, hand everything else\n"
"to the Python walk's methods (uniform.c says what the two tuples hold).");

static int parse_application(walk_state* w, PyObject* application)
{
    PyObject* mode = PyTuple_GET_SIZE(application) > 0 ? PyTuple_GET_ITEM(application, 0) : NULL;
    w->wrap_mode = mode != NULL && PyUnicode_Check(mode) && PyUnicode_CompareWithASCIIString(mode, "wrap") == 0;
    w->no_existing = 1;
    if (w->wrap_mode)
        return unpack_tuple("walk_uniform", application, "OUkkOddOOO",
                      (void*[]){&mode, &w->domain_name, &w->color, &w->category, &w->wrapper_type,
                                &w->wrappers, &w->pending, &w->rebind, &w->apply, &w->written});
#if PY_VERSION_HEX >= 0x030C0000
    if (!monitoring_ready()) {
        PyErr_SetString(PyExc_TypeError, "walk_uniform: the code engine is not available");
        return 0;
    }
    if (!unpack_tuple("walk_uniform", application, "OUkkOOOlp",
                (void*[]){&mode, &w->domain_name, &w->color, &w->category, &w->tool_id,
                          &w->set_local_events, &w->events, &w->codes, &w->no_existing}))
        return 0;
    w->tool = (int)PyLong_AsLong(w->tool_id);
    w->event_bits = PyLong_AsUnsignedLongMask(w->events);
    return !PyErr_Occurred();
#else
    PyErr_SetString(PyExc_TypeError, "walk_uniform: the code engine needs Python 3.12+");
    return 0;
#endif
}

int uniform_walk_run(walk_state* w, PyObject* application, PyObject* items)
{
    const char* domain;
    int result;
    if (!parse_application(w, application))
        return -1;
    if (w->wrap_mode && (w->written != Py_None && !PyList_Check(w->written))) {
        PyErr_SetString(PyExc_TypeError, "walk_uniform: written must be a list or None");
        return -1;
    }
    domain = PyUnicode_AsUTF8(w->domain_name);
    if (domain == NULL)
        return -1;
    /* One handle for the module's ranges (NULL: no tool attached; NVTX hands out one handle
     * per name). */
    w->domain = nvtxDomainCreateA(domain);
#if PY_VERSION_HEX >= 0x030C0000
    if (!w->wrap_mode) {
        w->pending_range = monitoring_pending(w->domain, w->domain_name, w->color, w->category);
        if (w->pending_range == NULL)
            return -1;
    }
#endif
    Py_INCREF(items);
    result = walk_items(w, items);
    Py_DECREF(items);
    Py_CLEAR(w->pending_range);
    return result;
}

static PyObject* walk_uniform(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    walk_state w;
    (void)module;

    if (nargs != 3 || !PyTuple_Check(args[0]) || !(PyList_Check(args[1]) || PyDict_Check(args[1])) ||
        !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "walk_uniform(application: tuple, items: list | dict, decisions: tuple)");
        return NULL;
    }
    memset(&w, 0, sizeof w);
    if (!unpack_tuple("walk_uniform", args[2], "UUllsdOfOOOOpdlOO",
                (void*[]){&w.name, &w.reason, &w.wrapped, &w.skipped, &w.classes_seen, &w.kinds,
                          &w.kind_of, &w.dunders, &w.visit_global, &w.visit_member, &w.wrap,
                          &w.failed, &w.builtins, &w.namespace, &w.rebound, &w.remember, &w.member}))
        return NULL;
    if (uniform_walk_run(&w, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef uniform_methods[] = {
    {"walk_uniform", (PyCFunction)(void (*)(void))walk_uniform, METH_FASTCALL, walk_uniform_doc},
    {NULL, NULL, 0, NULL},
};

int uniform_add_to_module(PyObject* module)
{
    str_module = PyUnicode_InternFromString("__module__");
    str_qualname = PyUnicode_InternFromString("__qualname__");
    str_func = PyUnicode_InternFromString("__func__");
    str_locals = PyUnicode_InternFromString("<locals>");
    reason_protocol = PyUnicode_InternFromString("protocol method: called implicitly");
    reason_c_type = PyUnicode_InternFromString("C type: its attributes cannot be set");
    reason_property = PyUnicode_InternFromString("property: descriptors are left untouched");
    reason_builtin_member = PyUnicode_InternFromString("builtin method: only module-level builtins are wrapped");
    reason_builtin = PyUnicode_InternFromString("builtin: the rule does not set builtins = true");
    str_wrapped = PyUnicode_InternFromString("__wrapped__");
    if (str_module == NULL || str_qualname == NULL || str_func == NULL || str_locals == NULL ||
        reason_protocol == NULL || reason_c_type == NULL || reason_property == NULL ||
        reason_builtin_member == NULL || reason_builtin == NULL || str_wrapped == NULL)
        return -1;
    if (wrapping_ready() < 0)
        return -1;
    return PyModule_AddFunctions(module, uniform_methods);
}
