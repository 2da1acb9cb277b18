/*
 * importer.py's InstrumentingLoader in C (issue 24): the stand-in for a target module's real
 * loader while the module executes. It delegates everything to the real loader, runs its
 * exec_module, puts the real loader back on the module (__loader__, __spec__.loader), then
 * hands the module importlib will return to `on_executed` (modulepath.c's ModulePath, or
 * ImportHook.module_executed). In a package targeted wholesale, the Python class ran some
 * twenty lines and a frame per module; this runs none, and leaves no frame of autonvtx's
 * between importlib's and the module's own (warnings' stacklevel counts as under Python).
 *
 * ChainedLoader(loader, on_executed, on_skipped): on_skipped(name, why) when the module
 * replaced itself in sys.modules by something that is not a module. Its attributes are the
 * real loader's (get_source, is_package, get_resource_reader, ...), but for `loader`,
 * `create_module` (the real one's, bound, or one that returns None) and exec_module.
 * set_stand_in_type(cls) names importer.py's own class, which may chain with this one (both
 * are unwrapped when the real loader is put back). A module whose stand-in has been cleared by
 * the collector (a cycle through it) is left as it is.
 */
#include "nvtxclient.h"

#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject* loader;
    PyObject* on_executed;
    PyObject* on_skipped;
    PyObject* create_module;
} ChainedLoaderObject;

static PyTypeObject ChainedLoaderType;
static PyObject* stand_in_type; /* importer.InstrumentingLoader */
static PyObject* module_spec_type; /* importlib.machinery.ModuleSpec */
static PyObject* str_loader;
static PyObject* str_dunder_loader;
static PyObject* str_spec;
static PyObject* str_name;
static PyObject* str_exec_module;
static PyObject* str_create_module;
static PyObject* why_replaced;
static PyObject* why_not_module;

static PyObject* sys_dict; /* sys.__dict__ */
static PyObject* str_modules;

PyObject* sys_attribute(PyObject* name)
{
    PyObject* found = PyDict_GetItemWithError(sys_dict, name);
    if (found == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "autonvtx: sys.%U is missing", name);
    return found;
}

static int is_stand_in(PyObject* loader)
{
    return Py_IS_TYPE(loader, &ChainedLoaderType) || (stand_in_type != NULL && (PyObject*)Py_TYPE(loader) == stand_in_type);
}

/* The real loader under any stand-ins: a new reference, NULL on error. */
static PyObject* real_loader(ChainedLoaderObject* self)
{
    PyObject* real = Py_NewRef(self->loader);
    while (real != NULL && is_stand_in(real)) {
        PyObject* inner = Py_IS_TYPE(real, &ChainedLoaderType) ? Py_XNewRef(((ChainedLoaderObject*)real)->loader)
                                                              : PyObject_GetAttr(real, str_loader);
        Py_SETREF(real, inner);
    }
    if (real == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "autonvtx: a stand-in loader under this one was cleared");
    return real;
}

/* importer.py's InstrumentingLoader._restore: the module names its real loader again where it
 * names this stand-in (written to its dict directly: no code of the program runs). */
static int restore(ChainedLoaderObject* self, PyObject* module)
{
    PyObject *namespace, *spec, *loader, *real;
    int result = 0;
    if (!PyModule_Check(module) || (namespace = PyModule_GetDict(module)) == NULL)
        return 0;
    if ((real = real_loader(self)) == NULL)
        return -1;
    loader = PyDict_GetItemWithError(namespace, str_dunder_loader);
    if (loader == (PyObject*)self)
        result = PyDict_SetItem(namespace, str_dunder_loader, real);
    else if (loader == NULL && PyErr_Occurred())
        result = -1;
    spec = result < 0 ? NULL : PyDict_GetItemWithError(namespace, str_spec);
    if (spec != NULL) {
        Py_INCREF(spec);
        if (PyObject_TypeCheck(spec, (PyTypeObject*)module_spec_type)) {
            PyObject* named = PyObject_GetAttr(spec, str_loader);
            if (named == NULL)
                result = -1;
            else if (named == (PyObject*)self)
                result = PyObject_SetAttr(spec, str_loader, real);
            Py_XDECREF(named);
        }
        Py_DECREF(spec);
    }
    else if (PyErr_Occurred())
        result = -1;
    Py_DECREF(real);
    return result;
}

/* sys.modules.get(name, module) once the module executed (a module may replace itself there):
 * a new reference. */
static PyObject* final_module(PyObject* module, PyObject** name_out)
{
    PyObject *namespace = PyModule_Check(module) ? PyModule_GetDict(module) : NULL, *spec, *name, *found;
    PyObject* modules = sys_attribute(str_modules);
    *name_out = NULL;
    if (modules == NULL)
        return NULL;
    spec = namespace != NULL ? PyDict_GetItemWithError(namespace, str_spec) : NULL;
    if (spec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return Py_NewRef(module);
    }
    Py_INCREF(spec);
    if (optional_attribute(spec, str_name, &name) < 0)
        name = NULL;
    Py_DECREF(spec);
    if (PyErr_Occurred())
        return NULL;
    if (name == NULL || !PyUnicode_Check(name) || !PyDict_Check(modules)) {
        Py_XDECREF(name);
        return Py_NewRef(module);
    }
    found = PyDict_GetItemWithError(modules, name);
    if (found == NULL && PyErr_Occurred()) {
        Py_DECREF(name);
        return NULL;
    }
    *name_out = name;
    return Py_NewRef(found != NULL ? found : module);
}

/* The name in `object.__spec__`, or "?" where it has none (or looking it up raised, as an odd
 * object's attributes may): a new reference, NULL only when "?" cannot be made. */
static PyObject* spec_name_of(PyObject* object)
{
    PyObject *spec, *name = NULL;
    spec = PyObject_GetAttrString(object, "__spec__");
    if (spec != NULL) {
        name = PyObject_GetAttrString(spec, "name");
        Py_DECREF(spec);
    }
    PyErr_Clear();
    if (name != NULL && PyUnicode_Check(name))
        return name;
    Py_XDECREF(name);
    return PyUnicode_FromString("?");
}

static PyObject* exec_module(ChainedLoaderObject* self, PyObject* module)
{
    PyObject *done, *final, *name, *result, *loader;
    if (self->loader == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "autonvtx: this stand-in loader was cleared");
        return NULL;
    }
    loader = Py_NewRef(self->loader);
    done = PyObject_CallMethodOneArg(loader, str_exec_module, module);
    Py_DECREF(loader);
    if (done != NULL && !PyModule_Check(module)) {
        /* The real create_module made another kind of object, as importlib allows: executed as
         * under Python, left without ranges. */
        Py_DECREF(done);
        name = spec_name_of(module); /* as importer.py's twin names it */
        if (name == NULL)
            return NULL;
        result = PyObject_CallFunctionObjArgs(self->on_skipped, name, why_not_module, NULL);
        Py_DECREF(name);
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
        Py_RETURN_NONE;
    }
    if (done == NULL) {
        /* The module raised: the real loader put back all the same, the error kept. */
        PyObject* exc = take_exception();
        if (restore(self, module) < 0) {
            PyObject* failed = take_exception(); /* raised in the module's stead, as a finally: */
            PyException_SetContext(failed, exc);
            exc = failed;
        }
        raise_exception(exc);
        return NULL;
    }
    Py_DECREF(done);
    if (restore(self, module) < 0 || (final = final_module(module, &name)) == NULL)
        return NULL;
    if (final != module) {
        if (!PyModule_Check(final)) {
            result = PyObject_CallFunctionObjArgs(self->on_skipped, name, why_replaced, NULL);
            Py_DECREF(final);
            Py_XDECREF(name);
            if (result == NULL)
                return NULL;
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
        if (restore(self, final) < 0) {
            Py_DECREF(final);
            Py_XDECREF(name);
            return NULL;
        }
    }
    Py_XDECREF(name);
    result = PyObject_CallOneArg(self->on_executed, final);
    Py_DECREF(final);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_NONE;
}

static PyObject* default_create_module(PyObject* unused, PyObject* spec)
{
    (void)unused;
    (void)spec;
    /* What importlib's module_from_spec says of a loader that defines exec_module() alone. */
    PyErr_SetString(PyExc_ImportError, "loaders that define exec_module() must also define create_module()");
    return NULL;
}

static PyMethodDef default_create_def = {"create_module", default_create_module, METH_O, NULL};

static PyObject* ChainedLoader_new(PyTypeObject* type, PyObject* args, PyObject* kwargs)
{
    ChainedLoaderObject* self;
    PyObject *loader, *on_executed, *on_skipped, *create;
    if (!PyArg_ParseTuple(args, "OOO:ChainedLoader", &loader, &on_executed, &on_skipped) ||
        (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0 && (PyErr_SetString(PyExc_TypeError, "ChainedLoader() takes no keyword arguments"), 1)))
        return NULL;
    if (optional_attribute(loader, str_create_module, &create) < 0)
        return NULL;
    if (create == NULL && (create = PyCFunction_New(&default_create_def, NULL)) == NULL)
        return NULL;
    self = (ChainedLoaderObject*)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(create);
        return NULL;
    }
    self->loader = Py_NewRef(loader);
    self->on_executed = Py_NewRef(on_executed);
    self->on_skipped = Py_NewRef(on_skipped);
    self->create_module = create;
    return (PyObject*)self;
}

/* Its own attributes first, then the real loader's. */
static PyObject* ChainedLoader_getattro(ChainedLoaderObject* self, PyObject* name)
{
    PyObject* found = PyObject_GenericGetAttr((PyObject*)self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return found;
    if (self->loader == NULL)
        return NULL;
    PyErr_Clear();
    return PyObject_GetAttr(self->loader, name);
}

static int ChainedLoader_traverse(ChainedLoaderObject* self, visitproc visit, void* arg)
{
    Py_VISIT(self->loader);
    Py_VISIT(self->on_executed);
    Py_VISIT(self->on_skipped);
    Py_VISIT(self->create_module);
    return 0;
}

static int ChainedLoader_clear(ChainedLoaderObject* self)
{
    Py_CLEAR(self->loader);
    Py_CLEAR(self->on_executed);
    Py_CLEAR(self->on_skipped);
    Py_CLEAR(self->create_module);
    return 0;
}

static void ChainedLoader_dealloc(ChainedLoaderObject* self)
{
    PyObject_GC_UnTrack(self);
    ChainedLoader_clear(self);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* set_stand_in_type(PyObject* cls, PyObject* stand_in)
{
    (void)cls;
    if (!PyType_Check(stand_in)) {
        PyErr_SetString(PyExc_TypeError, "set_stand_in_type(cls): a class");
        return NULL;
    }
    Py_XSETREF(stand_in_type, Py_NewRef(stand_in));
    Py_RETURN_NONE;
}

static PyMethodDef ChainedLoader_methods[] = {
    {"exec_module", (PyCFunction)exec_module, METH_O,
     PyDoc_STR("Run the real loader's exec_module, name the real loader again, call on_executed.")},
    {"set_stand_in_type", (PyCFunction)set_stand_in_type, METH_O | METH_CLASS,
     PyDoc_STR("set_stand_in_type(cls): importer.py's stand-in class, unwrapped like this one.")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef ChainedLoader_members[] = {
    {"loader", T_OBJECT, offsetof(ChainedLoaderObject, loader), READONLY, NULL},
    {"create_module", T_OBJECT, offsetof(ChainedLoaderObject, create_module), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ChainedLoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.InstrumentingLoader", /* as importer.py's: a module may ask */
    .tp_basicsize = sizeof(ChainedLoaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = ChainedLoader_new,
    .tp_getattro = (getattrofunc)ChainedLoader_getattro,
    .tp_traverse = (traverseproc)ChainedLoader_traverse,
    .tp_clear = (inquiry)ChainedLoader_clear,
    .tp_dealloc = (destructor)ChainedLoader_dealloc,
    .tp_methods = ChainedLoader_methods,
    .tp_members = ChainedLoader_members,
    .tp_doc = PyDoc_STR("ChainedLoader(loader, on_executed, on_skipped): importer.py's "
                        "InstrumentingLoader in C (chainedloader.c)."),
};

int chainedloader_add_to_module(PyObject* module)
{
    str_loader = PyUnicode_InternFromString("loader");
    str_dunder_loader = PyUnicode_InternFromString("__loader__");
    str_spec = PyUnicode_InternFromString("__spec__");
    str_name = PyUnicode_InternFromString("name");
    str_exec_module = PyUnicode_InternFromString("exec_module");
    str_create_module = PyUnicode_InternFromString("create_module");
    why_replaced = PyUnicode_InternFromString("replaced itself in sys.modules by a non-module object");
    why_not_module = PyUnicode_InternFromString("its loader made a non-module object");
    str_modules = PyUnicode_InternFromString("modules");
    {
        PyObject* sys = PyImport_ImportModule("sys");
        PyObject* bootstrap = PyImport_ImportModule("_frozen_importlib"); /* importlib.machinery's */
        if (sys == NULL || bootstrap == NULL) {
            Py_XDECREF(sys);
            return -1;
        }
        sys_dict = Py_NewRef(PyModule_GetDict(sys));
        module_spec_type = PyObject_GetAttrString(bootstrap, "ModuleSpec");
        Py_DECREF(sys);
        Py_DECREF(bootstrap);
        if (module_spec_type == NULL || !PyType_Check(module_spec_type))
            return -1;
    }
    if (str_loader == NULL || str_dunder_loader == NULL || str_spec == NULL || str_name == NULL ||
        str_exec_module == NULL || str_create_module == NULL || why_replaced == NULL || why_not_module == NULL || str_modules == NULL ||
        PyType_Ready(&ChainedLoaderType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ChainedLoader", (PyObject*)&ChainedLoaderType);
}
