/*
 * The per-module path of a package targeted wholesale (issue 24): what importer.py's
 * ImportHook.module_executed, walk.py's Walker.instrument and ModuleWalk.walk do for a
 * module that one rule selects as a whole, in one C call from its loader. Walked that way in
 * Python, each module ran about a hundred lines before the native walk (uniform.c) began:
 * half of what a package's import cost per function.
 *
 * ModulePath(slow, triggers, considered, uniform, reports, new_report, callbacks_for, failed,
 *            kinds, kind_of, dunders, member, refused, palette) is called with each module
 * the import hook hands over. It takes the module itself only when everything it needs is
 * known from dictionary lookups: the module is a target (the matcher's `considered`), one
 * rule selects all of it (the matcher's `uniform`, a Selection with a plan below), it has no
 * report yet (`reports`), no post-import callback waits for it (`triggers`), it is not
 * autonvtx's machinery (`refused`), and the engine holds the walk for its color. Then:
 * new_report(name, reason) -> (report, its list of names wrapped for reason, its skips, its
 * re-exports rebound); the C walk over the namespace; the Python walk's methods only if the
 * C walk hands something on (callbacks_for, uniform.h); failed(report, exc) for a walk that
 * raised, failed(name, exc) where the report could not be made. Every other module takes the Python way, `slow(module)` (ImportHook.module_executed),
 * which tells this path its plan (add_plan) for the modules after it.
 *
 * add_plan(selection, reason, builtins, walkers, auto, color): for the modules whose rules
 * give `selection`; `walkers`, the engine's dict of its walks by color for the rule (each a
 * functools.partial of walk_uniform and its application) (the engine empties it when they change: then a miss takes the Python
 * way, which fills it again); the color is `color`, or with `auto` the palette's entry for
 * the module's name (config.auto_color: crc32 of its UTF-8).
 */
#include "uniform.h"
#include "arguments.h"

#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject* selection;
    PyObject* reason;
    int builtins;
    PyObject* walkers;
    int auto_color;
    unsigned long color;
} path_plan;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow, *triggers, *considered, *uniform, *reports, *new_report, *callbacks_for,
        *failed, *kinds, *kind_of, *dunders, *member, *refused, *palette;
    path_plan* plans;
    Py_ssize_t plan_count;
    Py_ssize_t taken; /* modules walked here (tests and benchmarks read it) */
} ModulePathObject;

static PyObject* str_name;
static PyObject* str_args;
static PyObject* str_mp_main;
static uint32_t crc_table[256];

static uint32_t crc32_of(const char* data, Py_ssize_t size)
{
    uint32_t crc = 0xFFFFFFFFu;
    Py_ssize_t i;
    for (i = 0; i < size; ++i)
        crc = crc_table[(crc ^ (unsigned char)data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

/* config.auto_color(name): 1, or 0 where it cannot tell here (the Python way then decides). */
static int auto_color(ModulePathObject* self, PyObject* name, unsigned long* color)
{
    Py_ssize_t size, count = PyTuple_GET_SIZE(self->palette);
    const char* text = PyUnicode_AsUTF8AndSize(name, &size);
    unsigned long entry;
    if (text == NULL || count == 0) {
        PyErr_Clear();
        return 0;
    }
    entry = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(self->palette, crc32_of(text, size) % (uint32_t)count));
    if (entry == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *color = 0xFF000000ul | entry;
    return 1;
}

/* name, or its package before the first dot, is one autonvtx never instruments. */
static int is_refused(ModulePathObject* self, PyObject* name)
{
    Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0, PyUnicode_GET_LENGTH(name), 1), i;
    PyObject* top;
    int found = 0;
    if (dot == -2)
        return -1;
    top = dot < 0 ? Py_NewRef(name) : PyUnicode_Substring(name, 0, dot);
    if (top == NULL)
        return -1;
    for (i = 0; !found && i < PyTuple_GET_SIZE(self->refused); ++i)
        found = same_str(top, PyTuple_GET_ITEM(self->refused, i));
    Py_DECREF(top);
    return found;
}

/* The plan for `module`'s application and decisions: 1 (`*application` a new reference,
 * `w` filled from the plan), 0 where the Python way must take the module, -1 on error. */
static int plan_for(ModulePathObject* self, PyObject* module, walk_state* w, PyObject** application)
{
    PyObject *namespace, *name, *found, *key;
    path_plan* planned = NULL, plan; /* a copy: add_plan may move the array meanwhile */
    unsigned long color;
    Py_ssize_t i;
    int refused;

    if (!PyModule_Check(module) || (namespace = PyModule_GetDict(module)) == NULL)
        return 0;
    name = PyDict_GetItemWithError(namespace, str_name);
    if (name == NULL || !PyUnicode_CheckExact(name) || same_str(name, str_mp_main))
        return PyErr_Occurred() ? -1 : 0;
    if (PyDict_GET_SIZE(self->triggers) != 0 && (PyDict_GetItemWithError(self->triggers, name) != NULL ||
                                                 PyErr_Occurred()))
        return PyErr_Occurred() ? -1 : 0;
    if (PyDict_GetItemWithError(self->considered, name) != Py_True || (refused = is_refused(self, name)) != 0)
        return PyErr_Occurred() ? -1 : 0;
    found = PyDict_GetItemWithError(self->uniform, name);
    for (i = 0; found != NULL && planned == NULL && i < self->plan_count; ++i)
        if (self->plans[i].selection == found)
            planned = &self->plans[i];
    if (planned == NULL || PyDict_GetItemWithError(self->reports, name) != NULL)
        return PyErr_Occurred() ? -1 : 0;
    plan = *planned;
    color = plan.color;
    if (plan.auto_color && !auto_color(self, name, &color))
        return 0;
    key = PyLong_FromUnsignedLong(color);
    if (key == NULL)
        return -1;
    found = PyDict_GetItemWithError(plan.walkers, key);
    Py_DECREF(key);
    if (found == NULL || found == Py_None)
        return PyErr_Occurred() ? -1 : 0;
    /* The engine's walk, functools.partial(walk_uniform, application): its application, held
     * (the engine may empty its dict while the walk runs). */
    found = PyObject_GetAttr(found, str_args);
    if (found == NULL)
        return -1;
    *application = PyTuple_Check(found) && PyTuple_GET_SIZE(found) == 1 ? PyTuple_GET_ITEM(found, 0) : NULL;
    if (*application == NULL || !PyTuple_Check(*application)) {
        Py_DECREF(found);
        *application = NULL;
        return 0; /* not a walk of one application: the Python way */
    }
    Py_INCREF(*application);
    Py_DECREF(found);
    w->name = name;
    w->reason = plan.reason;
    w->builtins = plan.builtins;
    w->namespace = namespace;
    w->module = module;
    w->kinds = self->kinds;
    w->kind_of = self->kind_of;
    w->dunders = self->dunders;
    w->member = self->member;
    w->callbacks_for = self->callbacks_for;
    return 1;
}

/* An exception of the walk, reported as the Python way reports it (`report` the module's name
 * where its report could not be made). KeyboardInterrupt and the like propagate. 0, or -1
 * with the error set. */
static int report_failed(ModulePathObject* self, PyObject* report)
{
    PyObject* exc;
    int result;
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    exc = take_exception();
    result = call_back(self->failed, (PyObject*[]){report, exc}, 2);
    Py_DECREF(exc);
    return result;
}

/* A report's list, left to the collector's full passes no more when it holds nothing that
 * could be part of a cycle (names, code objects, walk.MEMBER): a package targeted wholesale
 * keeps tens of thousands of such entries for as long as the program runs, and every full
 * collection walked them (about a tenth of a package's cost per function, counted). */
static void untrack_plain(PyObject* list, PyObject* member)
{
    Py_ssize_t i;
    if (!PyList_CheckExact(list) || !PyObject_GC_IsTracked(list))
        return;
    for (i = 0; i < PyList_GET_SIZE(list); ++i) {
        PyObject* item = PyList_GET_ITEM(list, i);
        if (item != member && PyObject_IS_GC(item) && PyObject_GC_IsTracked(item))
            return;
    }
    PyObject_GC_UnTrack(list);
}

/* The module walked here: 1; 0 where the Python way must take it; -1 on error. */
static int take_module(ModulePathObject* self, PyObject* module)
{
    walk_state w;
    PyObject *application = NULL, *made;
    int planned, result;

    memset(&w, 0, sizeof w);
    planned = plan_for(self, module, &w, &application);
    if (planned < 0) {
        /* Nothing done yet: the Python way takes the module (and reports what goes wrong). */
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
        return 0;
    }
    if (planned == 0)
        return 0;
    Py_INCREF(w.name); /* held: borrowed from the module's namespace, which the walk may write */
    made = PyObject_Vectorcall(self->new_report, (PyObject*[]){w.name, w.reason}, 2, NULL);
    if (made != NULL && (!PyTuple_CheckExact(made) || PyTuple_GET_SIZE(made) != 4 ||
                         !PyList_Check(PyTuple_GET_ITEM(made, 1)) || !PyList_Check(PyTuple_GET_ITEM(made, 2)) ||
                         !PyList_Check(PyTuple_GET_ITEM(made, 3)))) {
        PyErr_SetString(PyExc_TypeError, "ModulePath: new_report() must give (report, list, list, list)");
        Py_CLEAR(made);
    }
    if (made == NULL || (w.classes_seen = PySet_New(NULL)) == NULL) {
        Py_XDECREF(made);
        Py_DECREF(application);
        result = report_failed(self, w.name); /* no report: the module's name in a warning */
        Py_DECREF(w.name);
        return result < 0 ? -1 : 1;
    }
    w.report = PyTuple_GET_ITEM(made, 0);
    w.wrapped = PyTuple_GET_ITEM(made, 1);
    w.skipped = PyTuple_GET_ITEM(made, 2);
    w.rebound = PyTuple_GET_ITEM(made, 3);
    self->taken++;
    result = uniform_walk_run(&w, application, w.namespace);
    if (result < 0)
        result = report_failed(self, w.report);
    untrack_plain(w.wrapped, w.member);
    untrack_plain(w.skipped, w.member);
    untrack_plain(w.rebound, w.member);
    Py_XDECREF(w.callbacks);
    Py_DECREF(w.classes_seen);
    Py_DECREF(application);
    Py_DECREF(made);
    Py_DECREF(w.name);
    return result < 0 ? -1 : 1;
}

int walk_back(walk_state* w, int which, PyObject** args, size_t nargs)
{
    PyObject* given[] = {w->visit_global, w->visit_member, w->wrap, w->failed, w->remember};
    PyObject* method = given[which];
    if (method == NULL) {
        if (w->callbacks == NULL) {
            PyObject* made = PyObject_Vectorcall(
                w->callbacks_for, (PyObject*[]){w->module, w->namespace, w->name, w->report, w->classes_seen},
                5, NULL);
            if (made == NULL)
                return -1;
            if (!PyTuple_CheckExact(made) || PyTuple_GET_SIZE(made) != 5) {
                Py_DECREF(made);
                PyErr_SetString(PyExc_TypeError, "walk: callbacks_for() must give five callables");
                return -1;
            }
            w->callbacks = made;
        }
        method = PyTuple_GET_ITEM(w->callbacks, which);
    }
    return call_back(method, args, nargs);
}

static PyObject* ModulePath_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    ModulePathObject* self = (ModulePathObject*)callable;
    int taken;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "ModulePath(module)");
        return NULL;
    }
    taken = take_module(self, args[0]);
    if (taken < 0)
        return NULL;
    if (taken == 0)
        return PyObject_Vectorcall(self->slow, args, 1, NULL);
    Py_RETURN_NONE;
}

#define PATH_FIELDS(X) X(slow) X(triggers) X(considered) X(uniform) X(reports) X(new_report) \
    X(callbacks_for) X(failed) X(kinds) X(kind_of) X(dunders) X(member) X(refused) X(palette)

static PyObject* ModulePath_new(PyTypeObject* type, PyObject* args, PyObject* kwargs)
{
    ModulePathObject* self;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "ModulePath() takes no keyword arguments");
        return NULL;
    }
    self = (ModulePathObject*)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (!unpack_tuple("ModulePath", args, "OddddOOOdOfOOO",
            (void*[]){&self->slow, &self->triggers, &self->considered, &self->uniform, &self->reports,
                      &self->new_report, &self->callbacks_for, &self->failed, &self->kinds,
                      &self->kind_of, &self->dunders, &self->member, &self->refused, &self->palette}) ||
        !PyTuple_Check(self->refused) || !PyTuple_Check(self->palette)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "ModulePath: refused and palette must be tuples");
#define FORGET(field) self->field = NULL; /* borrowed so far: not this object's to release */
        PATH_FIELDS(FORGET)
        Py_DECREF(self);
        return NULL;
    }
#define HOLD(field) Py_INCREF(self->field);
    PATH_FIELDS(HOLD)
    self->vectorcall = ModulePath_call;
    return (PyObject*)self;
}

static PyObject* ModulePath_add_plan(ModulePathObject* self, PyObject* args)
{
    path_plan plan, *grown;
    Py_ssize_t i;
    memset(&plan, 0, sizeof plan);
    if (!unpack_tuple("add_plan", args, "OUpdpk",
                      (void*[]){&plan.selection, &plan.reason, &plan.builtins, &plan.walkers,
                                &plan.auto_color, &plan.color}))
        return NULL;
    for (i = 0; i < self->plan_count; ++i)
        if (self->plans[i].selection == plan.selection)
            Py_RETURN_NONE; /* the first plan stands: a Selection's reason and rule never change */
    grown = PyMem_Realloc(self->plans, (size_t)(self->plan_count + 1) * sizeof plan);
    if (grown == NULL)
        return PyErr_NoMemory();
    self->plans = grown;
    Py_INCREF(plan.selection);
    Py_INCREF(plan.reason);
    Py_INCREF(plan.walkers);
    self->plans[self->plan_count++] = plan;
    Py_RETURN_NONE;
}

static int ModulePath_traverse(ModulePathObject* self, visitproc visit, void* arg)
{
    Py_ssize_t i;
#define VISIT(field) Py_VISIT(self->field);
    PATH_FIELDS(VISIT)
    for (i = 0; i < self->plan_count; ++i) {
        Py_VISIT(self->plans[i].selection);
        Py_VISIT(self->plans[i].reason);
        Py_VISIT(self->plans[i].walkers);
    }
    return 0;
}

static int ModulePath_clear(ModulePathObject* self)
{
    Py_ssize_t i, count = self->plan_count;
    path_plan* plans = self->plans;
#define CLEAR(field) Py_CLEAR(self->field);
    PATH_FIELDS(CLEAR)
    self->plans = NULL;
    self->plan_count = 0;
    for (i = 0; i < count; ++i) {
        Py_DECREF(plans[i].selection);
        Py_DECREF(plans[i].reason);
        Py_DECREF(plans[i].walkers);
    }
    PyMem_Free(plans);
    return 0;
}

static void ModulePath_dealloc(ModulePathObject* self)
{
    PyObject_GC_UnTrack(self);
    ModulePath_clear(self);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyMethodDef ModulePath_methods[] = {
    {"add_plan", (PyCFunction)ModulePath_add_plan, METH_VARARGS,
     PyDoc_STR("add_plan(selection, reason, builtins, walkers, auto, color): how to walk "
               "the modules whose rules give `selection` (modulepath.c).")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef ModulePath_members[] = {
    {"taken", T_PYSSIZET, offsetof(ModulePathObject, taken), READONLY,
     PyDoc_STR("How many modules were walked here (not handed to slow).")},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ModulePathType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.ModulePath",
    .tp_basicsize = sizeof(ModulePathObject),
    .tp_vectorcall_offset = offsetof(ModulePathObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = ModulePath_new,
    .tp_traverse = (traverseproc)ModulePath_traverse,
    .tp_clear = (inquiry)ModulePath_clear,
    .tp_dealloc = (destructor)ModulePath_dealloc,
    .tp_methods = ModulePath_methods,
    .tp_members = ModulePath_members,
    .tp_doc = PyDoc_STR("ModulePath(slow, triggers, considered, uniform, reports, new_report, "
                        "callbacks_for, failed, kinds, kind_of, dunders, member, refused, palette): "
                        "a module the import hook hands over, walked in one C call when one rule "
                        "selects all of it (modulepath.c), else slow(module)."),
};

int modulepath_add_to_module(PyObject* module)
{
    uint32_t n, k, c;
    for (n = 0; n < 256; ++n) {
        for (c = n, k = 0; k < 8; ++k)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
    str_name = PyUnicode_InternFromString("__name__");
    str_mp_main = PyUnicode_InternFromString("__mp_main__");
    str_args = PyUnicode_InternFromString("args");
    if (str_name == NULL || str_args == NULL || str_mp_main == NULL || PyType_Ready(&ModulePathType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ModulePath", (PyObject*)&ModulePathType);
}
