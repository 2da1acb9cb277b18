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
 *
 * A steady loop takes a faster way (shapes_call, from a ranged function wrapper of ranged.c:
 * no wrapt, no argument tuple): the key is a run of machine words (each array's dtype object's
 * address, its number of dimensions and each dimension) made without a Python object, read
 * from a NumPy array's own struct (no `shape` tuple made) or from `.shape` and `.dtype`, and
 * found in a second dict by those words' bytes. A dtype is told apart by identity there (NumPy's
 * and torch's dtypes are shared objects): the words are kept only where the Python key made for
 * them holds the very same dtype objects, which keeps those addresses alive and unique; a type
 * whose dtype is a new object at each call takes the first way each time.
 */
#include "nvtxclient.h"

#include <stdint.h>
#include <string.h>

/* The faster way's key of a call: words, and the dtype of each array in order. */
#define KEY_WORDS 64
#define KEY_ARRAYS 16
/* The faster way's dict is emptied when it holds this many keys (a program calling with ever
 * new shapes): the keys' Ranges stay in `made`. */
#define FAST_KEYS 4096
/* The keys kept with their own Range: shapes.py's SHAPES_PER_FUNCTION (make() names no more). */
#define MADE_KEYS 10000

typedef struct {
    Py_ssize_t words[KEY_WORDS];
    int n;
    PyObject* dtypes[KEY_ARRAYS]; /* addresses only: never dereferenced */
    int arrays;
} words_key;

/* What instances of a type are: shapes.py's dict (type -> kind, shared) and its function that
 * tells a type not in it yet. Borrowed where not inside a ShapedRanges. */
typedef struct {
    PyObject* array_types;
    PyObject* is_array_type;
} array_kinds;

typedef struct {
    PyObject_HEAD
    PyObject* made;          /* key -> Range: the keys seen */
    PyObject* fast;          /* the words' bytes -> (Range, key): the faster way's keys */
    PyObject* plain;         /* the Range without shapes (key ()) */
    PyObject* make;          /* make(key) -> Range, for a key not seen yet */
    array_kinds kinds;       /* what instances of each type are (shapes.py's dict and function) */
    vectorcallfunc vectorcall;
    /* The last call's words and their (Range, key) entry: a loop calling with the same shapes
     * again finds its Range by comparing words, with no bytes made and no dict look-up. */
    Py_ssize_t last_words[KEY_WORDS];
    int last_n;
    PyObject* last_entry;
} ShapedObject;

static PyObject *str_shape, *str_dtype;

/* What instances of a type are, as shapes.py's _is_array_type says: */
enum {
    NOT_ARRAY = 0,
    ARRAY_LIKE = 1,   /* read through `.shape` and `.dtype` */
    NUMPY_LAYOUT = 2, /* a NumPy array whose `shape` and `dtype` are ndarray's: read from its struct */
};

/* The kind of `cls`'s instances, or -1 with an exception set. */
static int array_kind(const array_kinds* kinds, PyTypeObject* cls)
{
    PyObject* found = PyDict_GetItemWithError(kinds->array_types, (PyObject*)cls);
    long kind;
    if (found == NULL) {
        if (PyErr_Occurred())
            return -1;
        found = PyObject_CallOneArg(kinds->is_array_type, (PyObject*)cls);
        if (found == NULL)
            return -1;
        kind = PyLong_AsLong(found);
        Py_DECREF(found);
        return kind == -1 && PyErr_Occurred() ? -1 : (int)kind;
    }
    if (found == Py_True || found == Py_False)
        return found == Py_True;
    kind = PyLong_AsLong(found);
    return kind == -1 && PyErr_Occurred() ? -1 : (int)kind;
}

/* visit(context, item) for each item of a list or a tuple, until one returns non-zero (returned).
 * Each item is held and the size read again at each step: reading an item's attributes runs
 * Python code, which could change the list. */
static int each_item(PyObject* sequence, int (*visit)(void*, PyObject*), void* context)
{
    Py_ssize_t i;
    for (i = 0; i < Py_SIZE(sequence); ++i) {
        PyObject* item = PyList_Check(sequence) ? PyList_GET_ITEM(sequence, i) : PyTuple_GET_ITEM(sequence, i);
        int visited;
        Py_INCREF(item);
        visited = visit(context, item);
        Py_DECREF(item);
        if (visited != 0)
            return visited;
    }
    return 0;
}

static int add(const array_kinds* kinds, PyObject* key, PyObject* value, int depth);

struct pairs_of {
    const array_kinds* kinds;
    PyObject* key;
    int depth;
};

static int add_item(void* context, PyObject* item)
{
    struct pairs_of* of = context;
    return add(of->kinds, of->key, item, of->depth);
}

/* Add `value`'s pairs to `key` (shapes.py's _add): 0, or -1 with an exception set. */
static int add(const array_kinds* kinds, PyObject* key, PyObject* value, int depth)
{
    PyTypeObject* cls = Py_TYPE(value);
    PyObject *shape, *dtype, *pair;
    int array;
    if (value == Py_None || cls == &PyLong_Type || cls == &PyFloat_Type || cls == &PyUnicode_Type ||
        cls == &PyBool_Type)
        return 0;
    if (depth && (cls == &PyList_Type || cls == &PyTuple_Type)) {
        /* A list or a tuple is never array-like itself: its items are looked at. */
        struct pairs_of context = {kinds, key, depth - 1};
        return each_item(value, add_item, &context);
    }
    array = array_kind(kinds, cls);
    if (array <= 0)
        return array;
    shape = PyObject_GetAttr(value, str_shape);
    if (shape == NULL)
        return -1;
    if (!PyTuple_Check(shape)) /* a tuple (torch.Size is one) as it is; a list made one, as shapes.py does */
        Py_SETREF(shape, PySequence_Tuple(shape));
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

/* A NumPy array's head as NumPy lays it out (PyArrayObject_fields, numpy/ndarraytypes.h; the
 * same in NumPy 1.x and 2.x: compiled extensions read these fields through NumPy's macros, so
 * they cannot move without breaking NumPy's ABI). */
typedef struct {
    PyObject_HEAD
    char* data;
    int nd;
    Py_ssize_t* dimensions;
    Py_ssize_t* strides;
    PyObject* base;
    PyObject* descr;
} numpy_head;

/* Whether the layout above was seen to hold: 1 once an array's struct gave its `ndim` and
 * `dtype`, -1 where it did not (every NumPy array is then read through its attributes). */
static int numpy_layout_checked;

enum { WORDS_MADE = 0, WORDS_NOT = 1 }; /* or -1 with an exception set */

static int numpy_layout_holds(PyObject* value)
{
    numpy_head* head = (numpy_head*)value;
    PyObject *ndim, *dtype;
    int holds;
    ndim = PyObject_GetAttrString(value, "ndim");
    if (ndim == NULL)
        return -1;
    dtype = PyObject_GetAttr(value, str_dtype);
    if (dtype == NULL) {
        Py_DECREF(ndim);
        return -1;
    }
    holds = PyLong_Check(ndim) && PyLong_AsLong(ndim) == head->nd && dtype == head->descr && head->nd >= 0;
    Py_DECREF(ndim);
    Py_DECREF(dtype);
    return holds;
}

/* Append one array's words to `key`. */
static int words_add_array(ShapedObject* self, words_key* key, PyObject* value, int kind)
{
    Py_ssize_t i, n;
    PyObject *shape, *dtype;
    (void)self;
    if (key->arrays == KEY_ARRAYS)
        return WORDS_NOT;
    if (kind == NUMPY_LAYOUT && numpy_layout_checked == 0) {
        int holds = numpy_layout_holds(value);
        if (holds < 0)
            return -1;
        numpy_layout_checked = holds ? 1 : -1;
    }
    if (kind == NUMPY_LAYOUT && numpy_layout_checked > 0) {
        numpy_head* head = (numpy_head*)value;
        n = head->nd;
        if (key->n + 2 + n > KEY_WORDS)
            return WORDS_NOT;
        key->words[key->n++] = (Py_ssize_t)(uintptr_t)head->descr;
        key->words[key->n++] = n;
        for (i = 0; i < n; ++i)
            key->words[key->n++] = head->dimensions[i];
        key->dtypes[key->arrays++] = head->descr;
        return WORDS_MADE;
    }
    shape = PyObject_GetAttr(value, str_shape);
    if (shape == NULL)
        return -1;
    if (!PyTuple_Check(shape) || key->n + 2 + PyTuple_GET_SIZE(shape) > KEY_WORDS) {
        Py_DECREF(shape);
        return WORDS_NOT;
    }
    n = PyTuple_GET_SIZE(shape);
    key->words[key->n + 1] = n;
    for (i = 0; i < n; ++i) {
        PyObject* dim = PyTuple_GET_ITEM(shape, i);
        Py_ssize_t size = PyLong_CheckExact(dim) ? PyLong_AsSsize_t(dim) : -1;
        if (size < 0) { /* not a plain int (a JAX tracer's symbolic dim), or an overflow */
            PyErr_Clear();
            Py_DECREF(shape);
            return WORDS_NOT;
        }
        key->words[key->n + 2 + i] = size;
    }
    Py_DECREF(shape);
    dtype = PyObject_GetAttr(value, str_dtype);
    if (dtype == NULL)
        return -1;
    /* Its address is compared with the Python key's before these words are kept (range_for). */
    key->words[key->n] = (Py_ssize_t)(uintptr_t)dtype;
    key->dtypes[key->arrays++] = dtype;
    Py_DECREF(dtype);
    key->n += 2 + (int)n;
    return WORDS_MADE;
}

static int words_add(ShapedObject* self, words_key* key, PyObject* value, int depth);

struct words_of {
    ShapedObject* self;
    words_key* key;
    int depth;
};

static int words_add_item(void* context, PyObject* item)
{
    struct words_of* of = context;
    return words_add(of->self, of->key, item, of->depth); /* WORDS_MADE is 0: the walk goes on */
}

/* Add `value`'s words to `key` as add() adds its pairs: WORDS_MADE, WORDS_NOT, or -1. */
static int words_add(ShapedObject* self, words_key* key, PyObject* value, int depth)
{
    PyTypeObject* cls = Py_TYPE(value);
    int kind;
    if (value == Py_None || cls == &PyLong_Type || cls == &PyFloat_Type || cls == &PyUnicode_Type ||
        cls == &PyBool_Type)
        return WORDS_MADE;
    if (depth && (cls == &PyList_Type || cls == &PyTuple_Type)) {
        struct words_of context = {self, key, depth - 1};
        return each_item(value, words_add_item, &context);
    }
    kind = array_kind(&self->kinds, cls);
    if (kind <= 0)
        return kind;
    return words_add_array(self, key, value, kind);
}

/* The Python key of the values (add()'s pairs as a tuple), or () with none; NULL on an error. */
static PyObject* python_key(const array_kinds* kinds, PyObject* const* values, Py_ssize_t n, PyObject* kwargs)
{
    PyObject *list, *key, *name, *value;
    Py_ssize_t i;
    list = PyList_New(0);
    if (list == NULL)
        return NULL;
    for (i = 0; i < n; ++i) {
        if (add(kinds, list, values[i], 1) < 0)
            goto failed;
    }
    if (kwargs != NULL) {
        i = 0;
        while (PyDict_Next(kwargs, &i, &name, &value)) {
            if (add(kinds, list, value, 1) < 0)
                goto failed;
        }
    }
    key = PyList_AsTuple(list);
    Py_DECREF(list);
    return key;
failed:
    Py_DECREF(list);
    return NULL;
}

/* Whether the Python key holds, in order, the very dtype objects the words were made of. */
static int same_dtypes(PyObject* key, const words_key* words)
{
    Py_ssize_t i, n = PyTuple_GET_SIZE(key);
    if (n != words->arrays)
        return 0;
    for (i = 0; i < n; ++i) {
        PyObject* pair = PyTuple_GET_ITEM(key, i);
        if (PyTuple_GET_ITEM(pair, 1) != words->dtypes[i])
            return 0;
    }
    return 1;
}

/* Keep `entry` (Range, key) as the last call's, found again by its words. */
static void remember(ShapedObject* self, const words_key* words, PyObject* entry)
{
    memcpy(self->last_words, words->words, (size_t)words->n * sizeof(Py_ssize_t));
    self->last_n = words->n;
    Py_XSETREF(self->last_entry, Py_NewRef(entry));
}

/* The Range for a call whose arguments are `values` (positional, then keyword) and `kwargs`'s
 * values where given: a new reference, or NULL with an exception set. */
static PyObject* range_for(ShapedObject* self, PyObject* const* values, Py_ssize_t n, PyObject* kwargs)
{
    words_key words;
    PyObject *bytes = NULL, *key, *range, *entry;
    Py_ssize_t i;
    int made = WORDS_MADE;
    PyObject *name, *value;

    words.n = words.arrays = 0;
    for (i = 0; i < n && made == WORDS_MADE; ++i)
        made = words_add(self, &words, values[i], 1);
    if (kwargs != NULL) {
        i = 0;
        while (made == WORDS_MADE && PyDict_Next(kwargs, &i, &name, &value))
            made = words_add(self, &words, value, 1);
    }
    if (made < 0)
        return NULL;
    if (made == WORDS_MADE) {
        if (words.arrays == 0)
            return Py_NewRef(self->plain);
        if (self->last_entry != NULL && words.n == self->last_n &&
            memcmp(words.words, self->last_words, (size_t)words.n * sizeof(Py_ssize_t)) == 0)
            return Py_NewRef(PyTuple_GET_ITEM(self->last_entry, 0));
        bytes = PyBytes_FromStringAndSize((const char*)words.words, (Py_ssize_t)words.n * (Py_ssize_t)sizeof(Py_ssize_t));
        if (bytes == NULL)
            return NULL;
        entry = PyDict_GetItemWithError(self->fast, bytes);
        if (entry != NULL) {
            Py_DECREF(bytes);
            remember(self, &words, entry);
            return Py_NewRef(PyTuple_GET_ITEM(entry, 0));
        }
        if (PyErr_Occurred()) {
            Py_DECREF(bytes);
            return NULL;
        }
    }
    key = python_key(&self->kinds, values, n, kwargs);
    if (key == NULL) {
        Py_XDECREF(bytes);
        return NULL;
    }
    if (PyTuple_GET_SIZE(key) == 0) {
        Py_DECREF(key);
        Py_XDECREF(bytes);
        return Py_NewRef(self->plain);
    }
    range = PyDict_GetItemWithError(self->made, key); /* raises for an unhashable dtype */
    if (range != NULL) {
        Py_INCREF(range);
    } else if (!PyErr_Occurred()) {
        range = PyObject_CallOneArg(self->make, key);
        /* Past MADE_KEYS, make() gives every new key the one "[other shapes]" Range: not kept
         * per key (a key seen again asks make() again, found by the faster way if kept there). */
        if (range != NULL && PyDict_GET_SIZE(self->made) < MADE_KEYS &&
            PyDict_SetItem(self->made, key, range) < 0)
            Py_CLEAR(range);
    }
    if (range != NULL && bytes != NULL && same_dtypes(key, &words)) {
        if (PyDict_GET_SIZE(self->fast) >= FAST_KEYS)
            PyDict_Clear(self->fast);
        entry = PyTuple_Pack(2, range, key);
        if (entry == NULL || PyDict_SetItem(self->fast, bytes, entry) < 0)
            Py_CLEAR(range);
        else
            remember(self, &words, entry);
        Py_XDECREF(entry);
    }
    Py_DECREF(key);
    Py_XDECREF(bytes);
    return range;
}

/* The Range for the call, or the range without shapes where its arguments' cannot be read. */
static PyObject* range_or_plain(ShapedObject* self, PyObject* const* values, Py_ssize_t n, PyObject* kwargs)
{
    PyObject* range = range_for(self, values, n, kwargs);
    if (range == NULL) {
        /* An odd array-like (a shape that cannot be read, an unhashable dtype): no shapes. */
        PyErr_Clear();
        range = Py_NewRef(self->plain);
    }
    return range;
}

/* A ranged function wrapper's call (ranged.c): `function` inside the Range of its arguments'
 * shapes, called with the caller's arguments as they are. */
PyObject* shapes_call(PyObject* shaped, PyObject* function, PyObject* const* args, size_t nargsf,
                      PyObject* kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf) + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    /* A reference of its own: the function may empty the dict that holds it (ever new shapes). */
    PyObject* range = range_or_plain((ShapedObject*)shaped, args, n, NULL);
    PyObject* result;
    if (!Py_IS_TYPE(range, &RangeType)) {
        Py_DECREF(range);
        PyErr_SetString(PyExc_TypeError, "autonvtx: ShapedRanges' make() gave no Range");
        return NULL;
    }
    result = ranged_call_in((RangeObject*)range, function, args, nargsf, kwnames);
    Py_DECREF(range);
    return result;
}

/* wrapt's call of the wrapper: (wrapped, instance, args, kwargs). */
static PyObject* Shaped_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    ShapedObject* self = (ShapedObject*)callable;
    PyObject *range, *result, *kwargs;
    if (PyVectorcall_NARGS(nargsf) != 4 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "ShapedRanges(wrapped, instance, args, kwargs)");
        return NULL;
    }
    kwargs = args[3] != NULL && PyDict_Check(args[3]) ? args[3] : NULL;
    if (PyTuple_Check(args[2]))
        range = range_or_plain(self, ((PyTupleObject*)args[2])->ob_item, PyTuple_GET_SIZE(args[2]), kwargs);
    else
        range = Py_NewRef(self->plain);
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
    Py_XSETREF(self->fast, PyDict_New());
    if (self->made == NULL || self->fast == NULL)
        return -1;
    Py_XSETREF(self->plain, Py_NewRef(plain));
    Py_XSETREF(self->make, Py_NewRef(make));
    Py_XSETREF(self->kinds.array_types, Py_NewRef(array_types));
    Py_XSETREF(self->kinds.is_array_type, Py_NewRef(is_array));
    self->vectorcall = Shaped_vectorcall;
    return 0;
}

static int Shaped_traverse(ShapedObject* self, visitproc visit, void* arg)
{
    Py_VISIT(self->made);
    Py_VISIT(self->fast);
    Py_VISIT(self->last_entry);
    Py_VISIT(self->plain);
    Py_VISIT(self->make);
    Py_VISIT(self->kinds.array_types);
    Py_VISIT(self->kinds.is_array_type);
    return 0;
}

static int Shaped_clear(ShapedObject* self)
{
    Py_CLEAR(self->made);
    Py_CLEAR(self->fast);
    Py_CLEAR(self->last_entry);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->make);
    Py_CLEAR(self->kinds.array_types);
    Py_CLEAR(self->kinds.is_array_type);
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

PyTypeObject ShapedType = {
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

/* shapes_key()'s array kinds: shapes.py's dict and function, given once by set_array_kinds(). */
static array_kinds module_kinds;

PyDoc_STRVAR(set_array_kinds_doc,
"set_array_kinds(array_types, is_array_type, /)\n--\n\n"
"The dict (type -> kind) and the function shapes_key() tells array-likes by (shapes.py's).");

static PyObject* set_array_kinds(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_array_kinds(array_types: dict, is_array_type: callable)");
        return NULL;
    }
    Py_XSETREF(module_kinds.array_types, Py_NewRef(args[0]));
    Py_XSETREF(module_kinds.is_array_type, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(shapes_key_doc,
"shapes_key(args, kwargs, /)\n--\n\n"
"shapes.py's shapes_key in C: the (shape, dtype) pair of each array-like argument, directly or\n"
"one level inside a list or tuple, positional then keyword; () with none. Raises what reading\n"
"an odd array-like raises.");

static PyObject* shapes_key(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyTuple_Check(args[0]) || (args[1] != Py_None && !PyDict_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "shapes_key(args: tuple, kwargs: dict | None)");
        return NULL;
    }
    if (module_kinds.array_types == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "shapes_key: set_array_kinds() was not called");
        return NULL;
    }
    return python_key(&module_kinds, ((PyTupleObject*)args[0])->ob_item, PyTuple_GET_SIZE(args[0]),
                      args[1] == Py_None ? NULL : args[1]);
}

static PyMethodDef shapes_functions[] = {
    {"shapes_key", (PyCFunction)(void (*)(void))shapes_key, METH_FASTCALL, shapes_key_doc},
    {"set_array_kinds", (PyCFunction)(void (*)(void))set_array_kinds, METH_FASTCALL, set_array_kinds_doc},
    {NULL, NULL, 0, NULL},
};

int shapes_add_to_module(PyObject* module)
{
    if (PyModule_AddFunctions(module, shapes_functions) < 0)
        return -1;
    str_shape = PyUnicode_InternFromString("shape");
    str_dtype = PyUnicode_InternFromString("dtype");
    if (str_shape == NULL || str_dtype == NULL || PyType_Ready(&ShapedType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ShapedRanges", (PyObject*)&ShapedType);
}
