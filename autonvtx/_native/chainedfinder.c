/*
 * importer.py's InstrumentingFinder.find_spec in C (issue 24): first on sys.meta_path, it is
 * asked about every import. A name no rule targets is turned away by one lookup in the
 * matcher's cache; for a target, the finders after it are asked for the real spec (the loop
 * importlib's own _find_spec would have run) and its loader is stood in for by the native
 * InstrumentingLoader (chainedloader.c). In a package targeted wholesale, the Python method ran
 * some forty lines a module.
 *
 * ChainedFinder(finder, considered, consider, triggers, chain, loader_type, on_executed,
 * on_skipped) is set as `finder.find_spec` (the Python finder stays the entry on sys.meta_path,
 * so install and uninstall are unchanged):
 *   considered, consider: the matcher's cache of should_consider_module and that method (asked
 *   on a miss); triggers: the import hook's post-import callbacks by name (a name there is
 *   looked up too); chain(fullname, spec): the Python finder's way with a spec whose loader is
 *   not the usual one (none, no exec_module, importlib.util.LazyLoader); the rest makes the
 *   stand-in loader, loader_type(loader, on_executed, on_skipped).
 * A name being looked up on this thread is not looked up again (a later finder that calls
 * find_spec for the same name finds None here, as with the Python finder).
 */
#include "uniform.h"

#include <stddef.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *finder, *considered, *consider, *triggers, *chain, *loader_type, *on_executed,
        *on_skipped;
    PyObject* busy_key; /* its names being looked up, in each thread's state dict */
    PyObject* seen;  /* sys.meta_path's entries when `after` was made (a tuple) */
    PyObject* after; /* the finders after `finder` in it (a list) */
} ChainedFinderObject;

static PyObject* str_find_spec;
static PyObject* str_loader;
static PyObject* str_exec_module;
static PyObject* str_lazy_loader;
static PyObject* str_importlib_util;
static PyObject* str_path;
static PyObject* str_target;
static PyObject* str_meta_path;
static PyObject* str_modules;

#define FINDER_FIELDS(X) X(finder) X(considered) X(consider) X(triggers) X(chain) X(loader_type) \
    X(on_executed) X(on_skipped)

/* Whether a rule or a post-import callback names `fullname`: 1, 0, -1 on error. */
static int wanted(ChainedFinderObject* self, PyObject* fullname)
{
    PyObject* known = PyDict_GetItemWithError(self->considered, fullname);
    int result;
    if (known == Py_True)
        return 1;
    if (known == NULL) {
        if (PyErr_Occurred())
            return -1;
        known = PyObject_CallOneArg(self->consider, fullname);
        if (known == NULL)
            return -1;
        result = PyObject_IsTrue(known);
        Py_DECREF(known);
        if (result != 0)
            return result;
    }
    if (PyDict_GET_SIZE(self->triggers) == 0)
        return 0;
    return PyDict_Contains(self->triggers, fullname);
}

/* The finders after ours on sys.meta_path, made again when its entries changed (borrowed). */
static PyObject* finders_after(ChainedFinderObject* self)
{
    PyObject *meta_path = sys_attribute(str_meta_path), *seen, *after;
    Py_ssize_t i, n, start = 0;
    if (meta_path == NULL)
        return NULL;
    if (PyList_Check(meta_path) && self->seen != NULL && PyTuple_GET_SIZE(self->seen) == PyList_GET_SIZE(meta_path)) {
        n = PyList_GET_SIZE(meta_path);
        for (i = 0; i < n && PyTuple_GET_ITEM(self->seen, i) == PyList_GET_ITEM(meta_path, i); ++i)
            ;
        if (i == n)
            return self->after;
    }
    /* Its entries as they are now (a finder may change it while asked; any sequence serves,
     * as for importlib), and the finders after ours: both kept only when both are made. */
    seen = PySequence_Tuple(meta_path);
    after = seen != NULL ? PyList_New(0) : NULL;
    if (after == NULL) {
        Py_XDECREF(seen);
        return NULL;
    }
    n = PyTuple_GET_SIZE(seen);
    for (i = 0; i < n; ++i)
        if (PyTuple_GET_ITEM(seen, i) == self->finder) {
            start = i + 1;
            break;
        }
    for (i = start; i < n; ++i) {
        PyObject* entry = PyTuple_GET_ITEM(seen, i);
        if (entry != self->finder && PyList_Append(after, entry) < 0) {
            Py_DECREF(seen);
            Py_DECREF(after);
            return NULL;
        }
    }
    Py_XSETREF(self->seen, seen);
    Py_XSETREF(self->after, after);
    return after;
}

/* The first spec a finder after ours gives (a new reference), None, or NULL on error. */
static PyObject* real_spec(ChainedFinderObject* self, PyObject* const* args)
{
    PyObject* after = finders_after(self);
    Py_ssize_t i;
    if (after == NULL)
        return NULL;
    Py_INCREF(after);
    for (i = 0; i < PyList_GET_SIZE(after); ++i) {
        PyObject *find, *spec;
        if (optional_attribute(PyList_GET_ITEM(after, i), str_find_spec, &find) < 0)
            break;
        if (find == NULL)
            continue;
        spec = PyObject_Vectorcall(find, args, 3, NULL);
        Py_DECREF(find);
        if (spec != Py_None) {
            Py_DECREF(after);
            return spec;
        }
        Py_DECREF(spec);
    }
    Py_DECREF(after);
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* This thread's names being looked up: a set in its thread state dict, under a key of its
 * own (a str: the finder itself there would outlive the program's modules at exit, and keep
 * everything it reaches from the first collections interpreter shutdown makes), there only
 * while a lookup is under way (a finder of each install() would leave one per thread). */
static PyObject* busy_names(ChainedFinderObject* self)
{
    PyObject* states = PyThreadState_GetDict();
    PyObject* names;
    if (states == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "autonvtx: no thread state dictionary");
        return NULL;
    }
    names = PyDict_GetItemWithError(states, self->busy_key);
    if (names != NULL || PyErr_Occurred())
        return names;
    names = PySet_New(NULL);
    if (names == NULL || PyDict_SetItem(states, self->busy_key, names) < 0) {
        Py_XDECREF(names);
        return NULL;
    }
    Py_DECREF(names);
    return names;
}

/* The thread's set taken out of its state dict again (its last lookup ended). */
static int forget_busy(ChainedFinderObject* self)
{
    PyObject* states = PyThreadState_GetDict();
    if (states == NULL)
        return 0;
    if (PyDict_DelItem(states, self->busy_key) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError))
            return -1;
        PyErr_Clear();
    }
    return 0;
}

/* hasattr(value, name): 1, 0, -1 on error. */
static int has_attribute(PyObject* value, PyObject* name)
{
    PyObject* found;
    int has = optional_attribute(value, name, &found);
    Py_XDECREF(found);
    return has;
}

/* Whether `loader` is one the stand-in serves as is: has exec_module, is no LazyLoader. */
static int usual_loader(PyObject* loader)
{
    PyObject *modules, *util, *lazy;
    int has = has_attribute(loader, str_exec_module), result;
    if (has <= 0)
        return has;
    modules = sys_attribute(str_modules);
    if (modules == NULL)
        return -1;
    util = PyDict_Check(modules) ? PyDict_GetItemWithError(modules, str_importlib_util) : NULL;
    if (util == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (optional_attribute(util, str_lazy_loader, &lazy) < 0)
        return -1;
    if (lazy == NULL)
        return 1;
    /* By the class's MRO, as the Python finder (not isinstance: an ABC's check). */
    result = !(PyType_Check(lazy) && PyType_IsSubtype(Py_TYPE(loader), (PyTypeObject*)lazy));
    Py_DECREF(lazy);
    return result;
}

static PyObject* find_spec(ChainedFinderObject* self, PyObject* fullname, PyObject* const* args)
{
    PyObject *names, *spec, *loader, *stand_in;
    int found, usual;
    if (!PyUnicode_Check(fullname) || (found = wanted(self, fullname)) == 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (found < 0 || (names = busy_names(self)) == NULL)
        return NULL;
    found = PySet_Contains(names, fullname);
    if (found != 0)
        return found < 0 ? NULL : Py_NewRef(Py_None); /* a later finder asked for the same name */
    Py_INCREF(names);
    if (PySet_Add(names, fullname) < 0) {
        Py_DECREF(names);
        return NULL;
    }
    spec = real_spec(self, args);
    {
        PyObject* raised = spec == NULL ? take_exception() : NULL; /* kept through the clean-up */
        if (PySet_Discard(names, fullname) < 0 || (PySet_GET_SIZE(names) == 0 && forget_busy(self) < 0))
            Py_CLEAR(spec);
        if (raised != NULL) {
            if (PyErr_Occurred())
                Py_DECREF(raised);
            else
                raise_exception(raised);
        }
    }
    Py_DECREF(names);
    if (spec == NULL || spec == Py_None)
        return spec;
    loader = PyObject_GetAttr(spec, str_loader);
    if (loader == NULL) {
        Py_DECREF(spec);
        return NULL;
    }
    usual = loader == Py_None ? 0 : usual_loader(loader);
    if (usual <= 0) {
        Py_DECREF(loader);
        if (usual == 0)
            Py_SETREF(spec, PyObject_CallFunctionObjArgs(self->chain, fullname, spec, NULL));
        else
            Py_CLEAR(spec);
        return spec;
    }
    stand_in = PyObject_CallFunctionObjArgs(self->loader_type, loader, self->on_executed, self->on_skipped, NULL);
    Py_DECREF(loader);
    if (stand_in == NULL || PyObject_SetAttr(spec, str_loader, stand_in) < 0)
        Py_CLEAR(spec);
    Py_XDECREF(stand_in);
    return spec;
}

/* find_spec(fullname, path=None, target=None) */
static PyObject* ChainedFinder_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    PyObject* given[3] = {NULL, Py_None, Py_None};
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), i;
    if (nargs < 1 || nargs > 3)
        goto bad;
    for (i = 0; i < nargs; ++i)
        given[i] = args[i];
    for (i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); ++i) {
        PyObject* key = PyTuple_GET_ITEM(kwnames, i);
        Py_ssize_t at = same_str(key, str_path) == 1 ? 1 : same_str(key, str_target) == 1 ? 2 : 0;
        if (at == 0 || at < nargs)
            goto bad;
        given[at] = args[nargs + i];
    }
    return find_spec((ChainedFinderObject*)callable, given[0], given);
bad:
    PyErr_SetString(PyExc_TypeError, "find_spec(fullname, path=None, target=None)");
    return NULL;
}

static PyObject* ChainedFinder_new(PyTypeObject* type, PyObject* args, PyObject* kwargs)
{
    ChainedFinderObject* self;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "ChainedFinder() takes no keyword arguments");
        return NULL;
    }
    self = (ChainedFinderObject*)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (!PyArg_ParseTuple(args, "OO!OO!OOOO:ChainedFinder", &self->finder, &PyDict_Type, &self->considered,
                          &self->consider, &PyDict_Type, &self->triggers, &self->chain, &self->loader_type,
                          &self->on_executed, &self->on_skipped)) {
        memset(&self->finder, 0, 8 * sizeof(PyObject*));
        Py_DECREF(self);
        return NULL;
    }
#define HOLD(field) Py_INCREF(self->field);
    FINDER_FIELDS(HOLD)
    self->busy_key = PyUnicode_FromFormat("autonvtx finder %p: names being looked up", (void*)self);
    if (self->busy_key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = ChainedFinder_call;
    return (PyObject*)self;
}

static int ChainedFinder_traverse(ChainedFinderObject* self, visitproc visit, void* arg)
{
#define VISIT(field) Py_VISIT(self->field);
    FINDER_FIELDS(VISIT)
    Py_VISIT(self->seen);
    Py_VISIT(self->after);
    return 0;
}

static int ChainedFinder_clear(ChainedFinderObject* self)
{
#define CLEAR(field) Py_CLEAR(self->field);
    FINDER_FIELDS(CLEAR)
    Py_CLEAR(self->busy_key);
    Py_CLEAR(self->seen);
    Py_CLEAR(self->after);
    return 0;
}

static void ChainedFinder_dealloc(ChainedFinderObject* self)
{
    PyObject_GC_UnTrack(self);
    ChainedFinder_clear(self);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyTypeObject ChainedFinderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.ChainedFinder",
    .tp_basicsize = sizeof(ChainedFinderObject),
    .tp_vectorcall_offset = offsetof(ChainedFinderObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = ChainedFinder_new,
    .tp_traverse = (traverseproc)ChainedFinder_traverse,
    .tp_clear = (inquiry)ChainedFinder_clear,
    .tp_dealloc = (destructor)ChainedFinder_dealloc,
    .tp_doc = PyDoc_STR("ChainedFinder(finder, considered, consider, triggers, chain, loader_type, "
                        "on_executed, on_skipped): importer.py's InstrumentingFinder.find_spec in C "
                        "(chainedfinder.c)."),
};

int chainedfinder_add_to_module(PyObject* module)
{
    str_find_spec = PyUnicode_InternFromString("find_spec");
    str_loader = PyUnicode_InternFromString("loader");
    str_exec_module = PyUnicode_InternFromString("exec_module");
    str_lazy_loader = PyUnicode_InternFromString("LazyLoader");
    str_importlib_util = PyUnicode_InternFromString("importlib.util");
    str_path = PyUnicode_InternFromString("path");
    str_target = PyUnicode_InternFromString("target");
    str_meta_path = PyUnicode_InternFromString("meta_path");
    str_modules = PyUnicode_InternFromString("modules");
    if (str_find_spec == NULL || str_loader == NULL || str_exec_module == NULL || str_lazy_loader == NULL ||
        str_importlib_util == NULL || str_path == NULL || str_target == NULL || str_meta_path == NULL ||
        str_modules == NULL || PyType_Ready(&ChainedFinderType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ChainedFinder", (PyObject*)&ChainedFinderType);
}
