/*
 * ShapedRanges: the wrapper of a rule with `shapes = true` (autonvtx/shapes.py), in C.
 *
 * Called as wrapt calls a wrapper, (wrapped, instance, args, kwargs), it builds the call's key:
 * a (shape, dtype) pair for each array-like argument, directly or one level inside a list or
 * tuple, positional then keyword, as shapes.py's shapes_key does. It finds the key's Range in
 * a dict (a steady loop makes no string) and calls it as the wrapper of `wrapped`, so the range
 * is exact and --budget measures it as any other. A key seen for the first time gets its Range
 * from the Python `make(key)` (which names it: `mm [32x128 float64, 128x64 float64]`). Whether a
 * type is array-like is asked of the type once (shapes.py's dict and function). An argument
 * whose shape or dtype cannot be read, or a key that cannot be hashed, gives the call the range
 * without shapes.
 */
#include "nvtxclient.h"

typedef struct {
    PyObject_HEAD
    PyObject* made;          /* key -> Range: the keys seen */
    PyObject* plain;         /* the Range without shapes (key ()) */
    PyObject* make;          /* make(key) -> Range, for a key not seen yet */
    PyObject* array_types;   /* type -> bool, shared with shapes.py */
    PyObject* is_array_type; /* is_array_type(type) -> bool, for a type not in it yet */
    vectorcallfunc vectorcall;
} ShapedObject;

static PyObject *str_shape, *str_dtype;

/* Whether instances of `cls` are array-like: 1, 0, or -1 with an exception set. */
static int is_array_type(ShapedObject* self, PyTypeObject* cls)
{
    PyObject* found = PyDict_GetItemWithError(self->array_types, (PyObject*)cls);
    int answer;
    if (found == NULL) {
        if (PyErr_Occurred())
            return -1;
        found = PyObject_CallOneArg(self->is_array_type, (PyObject*)cls);
        if (found == NULL)
            return -1;
        answer = PyObject_IsTrue(found);
        Py_DECREF(found);
        return answer;
    }
    return found == Py_True;
}

/* Add `value`'s pairs to `key` (shapes.py's _add): 0, or -1 with an exception set. */
static int add(ShapedObject* self, PyObject* key, PyObject* value, int depth)
{
    PyTypeObject* cls = Py_TYPE(value);
    PyObject *shape, *dtype, *pair;
    int array;
    if (value == Py_None || cls == &PyLong_Type || cls == &PyFloat_Type || cls == &PyUnicode_Type ||
        cls == &PyBool_Type)
        return 0;
    if (depth && (cls == &PyList_Type || cls == &PyTuple_Type)) {
        /* A list or a tuple is never array-like itself: its items are looked at. */
        PyObject* items = PySequence_Fast(value, "");
        Py_ssize_t i, n;
        if (items == NULL)
            return -1;
        n = PySequence_Fast_GET_SIZE(items);
        for (i = 0; i < n; ++i) {
            if (add(self, key, PySequence_Fast_GET_ITEM(items, i), depth - 1) < 0) {
                Py_DECREF(items);
                return -1;
            }
        }
        Py_DECREF(items);
        return 0;
    }
    array = is_array_type(self, cls);
    if (array <= 0)
        return array;
    shape = PyObject_GetAttr(value, str_shape);
    if (shape == NULL)
        return -1;
    dtype = PyObject_GetAttr(value, str_dtype);
    if (dtype == NULL) {
        Py_DECREF(shape);
        return -1;
    }
    pair = PyTuple_Pack(2, shape, dtype);
    Py_DECREF(shape);
    Py_DECREF(dtype);
    if (pair == NULL)
        return -1;
    array = PyList_Append(key, pair);
    Py_DECREF(pair);
    return array;
}

/* The Range for this call's arguments (a new reference), or NULL with an exception set. */
static PyObject* range_for(ShapedObject* self, PyObject* args, PyObject* kwargs)
{
    PyObject *list, *key, *range;
    Py_ssize_t i, n;
    PyObject *name, *value;
    if (!PyTuple_Check(args))
        return Py_NewRef(self->plain);
    list = PyList_New(0);
    if (list == NULL)
        return NULL;
    n = PyTuple_GET_SIZE(args);
    for (i = 0; i < n; ++i) {
        if (add(self, list, PyTuple_GET_ITEM(args, i), 1) < 0)
            goto failed;
    }
    if (kwargs != NULL && PyDict_Check(kwargs)) {
        i = 0;
        while (PyDict_Next(kwargs, &i, &name, &value)) {
            if (add(self, list, value, 1) < 0)
                goto failed;
        }
    }
    if (PyList_GET_SIZE(list) == 0) {
        Py_DECREF(list);
        return Py_NewRef(self->plain);
    }
    key = PyList_AsTuple(list);
    Py_DECREF(list);
    if (key == NULL)
        return NULL;
    range = PyDict_GetItemWithError(self->made, key); /* raises for an unhashable dtype */
    if (range != NULL) {
        Py_DECREF(key);
        return Py_NewRef(range);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    range = PyObject_CallOneArg(self->make, key);
    if (range != NULL && PyDict_SetItem(self->made, key, range) < 0)
        Py_CLEAR(range);
    Py_DECREF(key);
    return range;
failed:
    Py_DECREF(list);
    return NULL;
}

static PyObject* Shaped_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    ShapedObject* self = (ShapedObject*)callable;
    PyObject *range, *result;
    if (PyVectorcall_NARGS(nargsf) != 4 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "ShapedRanges(wrapped, instance, args, kwargs)");
        return NULL;
    }
    range = range_for(self, args[2], args[3]);
    if (range == NULL) {
        /* An odd array-like (a shape that cannot be read, an unhashable dtype): no shapes. */
        PyErr_Clear();
        range = Py_NewRef(self->plain);
    }
    result = PyObject_Vectorcall(range, args, 4, NULL);
    Py_DECREF(range);
    return result;
}

static int Shaped_init(ShapedObject* self, PyObject* args, PyObject* kwds)
{
    PyObject *plain, *make, *array_types, *is_array;
    (void)kwds;
    if (!PyArg_ParseTuple(args, "OOO!O:ShapedRanges", &plain, &make, &PyDict_Type, &array_types, &is_array))
        return -1;
    Py_XSETREF(self->made, PyDict_New());
    if (self->made == NULL)
        return -1;
    Py_XSETREF(self->plain, Py_NewRef(plain));
    Py_XSETREF(self->make, Py_NewRef(make));
    Py_XSETREF(self->array_types, Py_NewRef(array_types));
    Py_XSETREF(self->is_array_type, Py_NewRef(is_array));
    self->vectorcall = Shaped_vectorcall;
    return 0;
}

static int Shaped_traverse(ShapedObject* self, visitproc visit, void* arg)
{
    Py_VISIT(self->made);
    Py_VISIT(self->plain);
    Py_VISIT(self->make);
    Py_VISIT(self->array_types);
    Py_VISIT(self->is_array_type);
    return 0;
}

static int Shaped_clear(ShapedObject* self)
{
    Py_CLEAR(self->made);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->make);
    Py_CLEAR(self->array_types);
    Py_CLEAR(self->is_array_type);
    return 0;
}

static void Shaped_dealloc(ShapedObject* self)
{
    PyObject_GC_UnTrack(self);
    Shaped_clear(self);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* Shaped_seen(ShapedObject* self, void* closure)
{
    (void)closure;
    return PyDict_Size(self->made) >= 0 ? PyLong_FromSsize_t(PyDict_Size(self->made)) : NULL;
}

static PyGetSetDef Shaped_getset[] = {
    {"seen", (getter)Shaped_seen, NULL, "How many distinct keys have their own Range.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ShapedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "autonvtx._nvtxclient.ShapedRanges",
    .tp_basicsize = sizeof(ShapedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = PyDoc_STR("ShapedRanges(plain, make, array_types, is_array_type): shapes.py's wrapper in C."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Shaped_init,
    .tp_dealloc = (destructor)Shaped_dealloc,
    .tp_traverse = (traverseproc)Shaped_traverse,
    .tp_clear = (inquiry)Shaped_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ShapedObject, vectorcall),
    .tp_getset = Shaped_getset,
};

int shapes_add_to_module(PyObject* module)
{
    str_shape = PyUnicode_InternFromString("shape");
    str_dtype = PyUnicode_InternFromString("dtype");
    if (str_shape == NULL || str_dtype == NULL || PyType_Ready(&ShapedType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ShapedRanges", (PyObject*)&ShapedType);
}
