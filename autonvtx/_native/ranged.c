/*
 * ranged_function_type(base): a subclass of autonvtx's wrapt FunctionWrapper for plain Python
 * functions whose call is a vectorcall in C (push, call the function with the caller's
 * arguments untouched, pop on every exit path), bypassing wrapt's tp_call (a dict and a
 * 4-tuple per call, then a call of the wrapper), and which binds like a function: __get__
 * gives a bound method, and Py_TPFLAGS_METHOD_DESCRIPTOR lets `obj.method(x)` skip making
 * one, exactly as CPython does for functions (PEP 590). For generator, coroutine and async
 * generator functions the call drives what the function returns instead (steps.c).
 */
#include "nvtxclient.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

/* ---- the ranged function wrapper type ---- */

/* Lives right after the base's fields; the type's tp_vectorcall_offset points at it, so the
 * call path finds it without knowing which base it was made for. */
typedef struct {
    vectorcallfunc vectorcall;
    PyObject* function;   /* the plain function: called directly, not through wrapt */
    PyObject* range;      /* its Range, or until its first call a PendingStyle */
    PyObject* message;    /* with a PendingStyle: the range's message, else NULL */
} ranged_fields;

#define RANGED_FIELDS(op) ((ranged_fields*)((char*)(op) + Py_TYPE(op)->tp_vectorcall_offset))

/* Until its first call, a wrapper made by a wholesale walk holds a PendingStyle (range.c),
 * shared by the module's wrappers, instead of a Range. */
/* The wrapper's Range, made now if it waited for its first call; NULL with an error set when
 * the wrapper is broken (its fields are writable members: a program could have replaced or
 * deleted them; subtype_dealloc and subtype_traverse only manage writable ones). */
static RangeObject* ranged_range(PyObject* self)
{
    ranged_fields* fields = RANGED_FIELDS(self);
    PyObject* range = fields->range;
    PendingStyleObject* style = (PendingStyleObject*)range;
    RangeObject* made;

    if (fields->function != NULL && range != NULL && Py_IS_TYPE(range, &RangeType))
        return (RangeObject*)range;
    if (fields->function == NULL || range == NULL || !Py_IS_TYPE(range, &PendingStyleType) ||
        fields->message == NULL || !PyUnicode_Check(fields->message)) {
        PyErr_SetString(PyExc_TypeError, "autonvtx: this ranged function wrapper is not initialized");
        return NULL;
    }
    made = range_new_in_domain(style->domain, style->domain_name, fields->message, style->color,
                               style->category);
    if (made == NULL)
        return NULL;
    Py_SETREF(fields->range, (PyObject*)made);
    Py_CLEAR(fields->message);
    return made;
}

static PyObject* ranged_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                   PyObject* kwnames)
{
    ranged_fields* fields = RANGED_FIELDS(self);
    PyObject* function = fields->function;
    PyObject* range = fields->range;

    if (function == NULL || range == NULL || !Py_IS_TYPE(range, &RangeType)) {
        if (function != NULL && range != NULL && Py_IS_TYPE(range, &ShapedType))
            return shapes_call(range, function, args, nargsf, kwnames); /* a Range per shapes */
        if ((range = (PyObject*)ranged_range(self)) == NULL)
            return NULL;
    }
    return ranged_call_in((RangeObject*)range, function, args, nargsf, kwnames);
}

/* A generator, coroutine or async generator function: what the call returns is driven, a
 * range around each of its resumptions (steps.c), not around the call that makes it. */
static PyObject* ranged_suspending_call(PyObject* self, PyObject* const* args, size_t nargsf,
                                        PyObject* kwnames, int kind)
{
    RangeObject* range = ranged_range(self);

    if (range == NULL)
        return NULL;
    return steps_drive(range, PyObject_Vectorcall(RANGED_FIELDS(self)->function, args, nargsf, kwnames),
                       kind);
}

#define SUSPENDING_VECTORCALL(name, kind)                                                     \
    static PyObject* name(PyObject* self, PyObject* const* args, size_t nargsf,               \
                          PyObject* kwnames)                                                  \
    {                                                                                         \
        return ranged_suspending_call(self, args, nargsf, kwnames, kind);                     \
    }
SUSPENDING_VECTORCALL(ranged_generator_vectorcall, KIND_GENERATOR)
SUSPENDING_VECTORCALL(ranged_iterable_coroutine_vectorcall, KIND_ITERABLE_COROUTINE)
SUSPENDING_VECTORCALL(ranged_coroutine_vectorcall, KIND_COROUTINE)
SUSPENDING_VECTORCALL(ranged_async_generator_vectorcall, KIND_ASYNC_GENERATOR)

/* The call path of a ranged wrapper around `function`, by what its calls return. */
static vectorcallfunc ranged_call_path(PyObject* function)
{
    static const vectorcallfunc by_kind[KIND_COUNT] = {
        ranged_generator_vectorcall,
        ranged_iterable_coroutine_vectorcall,
        ranged_coroutine_vectorcall,
        ranged_async_generator_vectorcall,
    };
    int kind = suspending_kind(((PyCodeObject*)PyFunction_GET_CODE(function))->co_flags);
    return kind < 0 ? ranged_vectorcall : by_kind[kind];
}

/* The function's own binding (func_descr_get): itself from the class, a bound method from an
 * instance. */
static PyObject* ranged_descr_get(PyObject* self, PyObject* obj, PyObject* type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static int ranged_init(PyObject* self, PyObject* args, PyObject* kwds);

/* wrapt's proxy makes each instance a dictionary and copies the function's __module__ and
 * __doc__ into it, so that they win over the wrapper classes' own (a class statement puts
 * both in the class's dictionary). A wholesale walk makes thousands of these wrappers and
 * the dictionary was most of each (184 of about 450 bytes on 3.11): this type reads and writes
 * both through to the function instead (its getsets, found before any base class's, and
 * ranged_setattro), and the dictionary goes; wrapt makes one again only for a `_self_` name
 * the program sets on the wrapper. */
static void drop_instance_dict(PyObject* self)
{
    Py_ssize_t offset = Py_TYPE(self)->tp_dictoffset;
    if (offset > 0)
        Py_CLEAR(*(PyObject**)((char*)self + offset));
}

static int ranged_setattro(PyObject* self, PyObject* name, PyObject* value);

/* The base's setattro (wrapt's), found from the ranged type up. */
static setattrofunc ranged_base_setattro(PyObject* self)
{
    PyTypeObject* type = Py_TYPE(self);
    while (type != NULL && type->tp_setattro != ranged_setattro)
        type = type->tp_base;
    return type != NULL && type->tp_base != NULL ? type->tp_base->tp_setattro : NULL;
}

/* __module__ and __doc__ through ranged_getset (wrapt's setattro writes them to the instance
 * dictionary too, which is gone); every other name as wrapt sets it. */
static int ranged_setattro(PyObject* self, PyObject* name, PyObject* value)
{
    setattrofunc base = ranged_base_setattro(self);
    if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "__module__") == 0 ||
                                  PyUnicode_CompareWithASCIIString(name, "__doc__") == 0))
        return PyObject_GenericSetAttr(self, name, value);
    if (base == NULL) {
        PyErr_SetString(PyExc_TypeError, "autonvtx: ranged function wrapper without a base");
        return -1;
    }
    return base(self, name, value);
}

static PyObject* ranged_get_through(PyObject* self, void* name)
{
    PyObject* function = RANGED_FIELDS(self)->function;
    if (function == NULL) {
        PyErr_SetString(PyExc_TypeError, "autonvtx: this ranged function wrapper is not initialized");
        return NULL;
    }
    return PyObject_GetAttrString(function, (const char*)name);
}

static int ranged_set_through(PyObject* self, PyObject* value, void* name)
{
    PyObject* function = RANGED_FIELDS(self)->function;
    if (function == NULL) {
        PyErr_SetString(PyExc_TypeError, "autonvtx: this ranged function wrapper is not initialized");
        return -1;
    }
    return PyObject_SetAttrString(function, (const char*)name, value);
}

static PyTypeObject* ranged_base_init_type(PyObject* self)
{
    PyTypeObject* type = Py_TYPE(self);
    while (type != NULL && type->tp_init != ranged_init)
        type = type->tp_base;
    return type != NULL ? type->tp_base : NULL;
}

/* __init__(function, range): wrapt's own __init__ (its wrapped object, wrapper and binding:
 * attribute proxying, __wrapped__ and the rest stay wrapt's), then the two call fields. */
static int ranged_init(PyObject* self, PyObject* args, PyObject* kwds)
{
    PyObject* function;
    PyObject* range;
    PyTypeObject* base = ranged_base_init_type(self);
    ranged_fields* fields = RANGED_FIELDS(self);

    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "ranged function wrapper takes no keyword arguments");
        return -1;
    }
    if (!PyArg_UnpackTuple(args, "ranged function wrapper", 2, 2, &function, &range))
        return -1;
    if (!PyFunction_Check(function)) {
        PyErr_Format(PyExc_TypeError, "ranged function wrapper wraps a plain function, not %.100s",
                     Py_TYPE(function)->tp_name);
        return -1;
    }
    if (!(Py_IS_TYPE(range, &RangeType) && ((RangeObject*)range)->domain_name != NULL) &&
        !Py_IS_TYPE(range, &PendingStyleType) && !Py_IS_TYPE(range, &ShapedType)) {
        PyErr_SetString(PyExc_TypeError, "ranged function wrapper needs an initialized Range");
        return -1;
    }
    if (base == NULL || base->tp_init == NULL || base->tp_init(self, args, NULL) < 0)
        return -1;
    drop_instance_dict(self);
    fields->vectorcall = ranged_call_path(function);
    Py_INCREF(function);
    Py_XSETREF(fields->function, function);
    Py_INCREF(range);
    Py_XSETREF(fields->range, range);
    return 0;
}

static PyObject* ranged_new(PyTypeObject* type, PyObject* args, PyObject* kwds)
{
    PyObject* self = type->tp_base->tp_new(type, args, kwds);
    if (self != NULL)
        RANGED_FIELDS(self)->vectorcall = ranged_vectorcall;
    return self;
}

PyDoc_STRVAR(ranged_function_type_doc,
"ranged_function_type(base, name, /)\n--\n\n"
"A subclass `name` (a dotted 'module.Class') of `base` (a wrapt FunctionWrapper subclass, heap\n"
"type, no __dict__ of its own) whose instances, made as cls(function, range), call `function`\n"
"inside `range` in C and bind like functions.");

static PyObject* ranged_function_type(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    PyTypeObject* base;
    const char* name;
    Py_ssize_t offset;
    PyObject* bases;
    PyObject* type;
    (void)module;

    if (nargs != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "ranged_function_type(base: type, name: str)");
        return NULL;
    }
    base = (PyTypeObject*)args[0];
    if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(base->tp_flags & Py_TPFLAGS_HAVE_GC) ||
        base->tp_itemsize != 0 || base->tp_traverse == NULL || base->tp_clear == NULL) {
        PyErr_SetString(PyExc_TypeError, "ranged_function_type: base must be a fixed-size GC heap type");
        return NULL;
    }
    name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL)
        return NULL;
    offset = (base->tp_basicsize + (Py_ssize_t)sizeof(void*) - 1) & ~((Py_ssize_t)sizeof(void*) - 1);

    /* The spec is read only during PyType_FromSpecWithBases (members are copied into the
     * type), so stack storage is enough; only `name` must outlive it, and CPython copies the
     * name too (3.11+: tp_name points into the heap type's own ht_name). */
    PyMemberDef members[] = {
        {"__vectorcalloffset__", T_PYSSIZET, offset + offsetof(ranged_fields, vectorcall), READONLY, NULL},
        {"_self_ranged_function", T_OBJECT_EX, offset + offsetof(ranged_fields, function), 0, NULL},
        {"_self_range", T_OBJECT_EX, offset + offsetof(ranged_fields, range), 0, NULL},
        {"_self_range_message", T_OBJECT_EX, offset + offsetof(ranged_fields, message), 0, NULL},
        {NULL, 0, 0, 0, NULL},
    };
    /* The base's dealloc/traverse/clear are CPython's subtype_dealloc/_traverse/_clear (base
     * is a class statement's type): reused as they are, they manage our two object members
     * exactly as they manage a Python class's __slots__, and the reference to the heap type. */
    static PyGetSetDef getset[] = {
        {"__module__", ranged_get_through, ranged_set_through, NULL, "__module__"},
        {"__doc__", ranged_get_through, ranged_set_through, NULL, "__doc__"},
        {NULL, NULL, NULL, NULL, NULL},
    };
    PyType_Slot slots[] = {
        {Py_tp_dealloc, (void*)base->tp_dealloc},
        {Py_tp_traverse, (void*)base->tp_traverse},
        {Py_tp_clear, (void*)base->tp_clear},
        {Py_tp_call, (void*)PyVectorcall_Call},
        {Py_tp_descr_get, (void*)ranged_descr_get},
        {Py_tp_init, (void*)ranged_init},
        {Py_tp_new, (void*)ranged_new},
        {Py_tp_members, members},
        {Py_tp_getset, getset},
        {Py_tp_setattro, (void*)ranged_setattro},
        {0, NULL},
    };
    PyType_Spec spec = {
        name,
        (int)(offset + (Py_ssize_t)sizeof(ranged_fields)),
        0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
            Py_TPFLAGS_METHOD_DESCRIPTOR,
        slots,
    };
    bases = PyTuple_Pack(1, (PyObject*)base);
    if (bases == NULL)
        return NULL;
    type = PyType_FromSpecWithBases(&spec, bases);
    Py_DECREF(bases);
    return type;
}

PyDoc_STRVAR(ranged_wrapper_doc,
"ranged_wrapper(cls, function, domain, message, color, category, /)\n--\n\n"
"cls(function, Range(domain, message, color, category)) in one call, for `cls` made by\n"
"ranged_function_type. A generator, coroutine or async generator function's wrapper drives\n"
"what it returns, a range per resumption; None for those until set_drivers() was called.\n"
"Instrumenting a package wholesale makes thousands: no Python frame, no argument parsing.");

static int ranged_ready(PyObject* function);

static PyObject* ranged_wrapper(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    PyObject* cls;
    PyObject* function;
    RangeObject* range;
    PyObject* wrapper;
    unsigned long color, category;
    (void)module;

    if (nargs != 6 || !PyType_Check(args[0]) || !PyUnicode_Check(args[2]) ||
        !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "ranged_wrapper(cls: type, function, domain: str, message: str, "
                        "color: int, category: int)");
        return NULL;
    }
    cls = args[0];
    function = args[1];
    if (((PyTypeObject*)cls)->tp_init != ranged_init) {
        PyErr_SetString(PyExc_TypeError, "ranged_wrapper: cls must come from ranged_function_type");
        return NULL;
    }
    if (!PyFunction_Check(function)) {
        PyErr_Format(PyExc_TypeError, "ranged_wrapper wraps a plain function, not %.100s",
                     Py_TYPE(function)->tp_name);
        return NULL;
    }
    if (!ranged_ready(function))
        Py_RETURN_NONE;
    color = PyLong_AsUnsignedLongMask(args[4]);
    if (color == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    category = PyLong_AsUnsignedLongMask(args[5]);
    if (category == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    range = range_new_prepared(args[2], args[3], color, category);
    if (range == NULL)
        return NULL;
    wrapper = ranged_make(cls, function, range);
    Py_DECREF(range);
    return wrapper;
}

/* Whether a ranged wrapper can serve `function` (a generator-like one needs the drivers). */
static int ranged_ready(PyObject* function)
{
    return suspending_kind(((PyCodeObject*)PyFunction_GET_CODE(function))->co_flags) < 0 || steps_ready();
}

/* ---- making wrappers by the thousand ----
 *
 * wrapt's own construction of a wrapper (its tp_new makes the proxy a dictionary; its __init__
 * parses arguments, finds its module state, works out the binding and copies __module__ and
 * __doc__ into that dictionary, which ranged_init then drops) was about 4,700 of the 28,000
 * instructions a function cost a wholesale walk (numpy + pandas, 3.11). Every wrapper of a
 * plain function ends up alike but for two of wrapt's fields (the function and the range), so
 * the first one of a type is made by wrapt and kept as a template: its fields as wrapt left
 * them, each word known to be NULL, a reference (None, the binding string, the function, the
 * range) or a small integer (wrapt's flags). The next ones are allocated and filled from it.
 * Anything unexpected in the template (another wrapt's fields: a reference this cannot name)
 * leaves wrapt's construction in place. A template is trusted only once a wrapper filled from
 * it equals, word for word, the one wrapt made from the same function and range. */
#define TEMPLATE_WORDS 32
enum { WORD_COPY, WORD_REFERENCE, WORD_FUNCTION, WORD_RANGE };
static struct {
    PyTypeObject* type;   /* the type it serves; NULL: none yet */
    int usable;           /* verified; 0 with `type` set: wrapt's construction for good */
    Py_ssize_t first, end; /* the words of wrapt's part, after the object header */
    Py_ssize_t function_word; /* the one that holds the function: wrapt's wrapped object */
    void* words[TEMPLATE_WORDS];
    char kinds[TEMPLATE_WORDS];
} template_of;

static PyObject* ranged_construct(PyObject* cls, PyObject* function, PyObject* range)
{
    return PyObject_Vectorcall(cls, (PyObject*[]){function, range}, 2, NULL);
}

/* A wrapper filled from the template (the caller checked the type), or NULL on error. */
static PyObject* ranged_fill(PyTypeObject* type, PyObject* function, PyObject* range)
{
    PyObject* self = type->tp_alloc(type, 0);
    void** words;
    ranged_fields* fields;
    Py_ssize_t i;

    if (self == NULL)
        return NULL;
    words = (void**)self;
    for (i = template_of.first; i < template_of.end; ++i) {
        switch (template_of.kinds[i]) {
        case WORD_FUNCTION:
            words[i] = Py_NewRef(function);
            break;
        case WORD_RANGE:
            words[i] = Py_NewRef(range);
            break;
        case WORD_REFERENCE:
            words[i] = Py_NewRef((PyObject*)template_of.words[i]);
            break;
        default:
            words[i] = template_of.words[i];
        }
    }
    fields = RANGED_FIELDS(self);
    fields->vectorcall = ranged_call_path(function);
    fields->function = Py_NewRef(function);
    fields->range = Py_NewRef(range);
    return self;
}

/* Learn the template from `made`, the wrapper wrapt made of (function, range); then check a
 * wrapper filled from it reads the same. Errors leave wrapt's construction in place. */
static void ranged_learn(PyTypeObject* type, PyObject* made, PyObject* function, PyObject* range)
{
    PyObject* binding = PyObject_GetAttrString(made, "_self_binding");
    PyObject* filled;
    void** words = (void**)made;
    Py_ssize_t i, functions = 0, ranges = 0;

    template_of.type = type;
    template_of.usable = 0;
    template_of.first = (Py_ssize_t)(sizeof(PyObject) / sizeof(void*));
    template_of.end = type->tp_vectorcall_offset / (Py_ssize_t)sizeof(void*);
    if (binding == NULL) {
        PyErr_Clear();
        return;
    }
    if (template_of.end > TEMPLATE_WORDS || type->tp_vectorcall_offset % sizeof(void*) != 0 ||
        (type->tp_dictoffset > 0 && *(PyObject**)((char*)made + type->tp_dictoffset) != NULL) ||
        (type->tp_weaklistoffset > 0 && *(PyObject**)((char*)made + type->tp_weaklistoffset) != NULL)) {
        Py_DECREF(binding);
        return;
    }
    for (i = template_of.first; i < template_of.end; ++i) {
        void* word = words[i];
        template_of.words[i] = word;
        if (word == function)
            template_of.kinds[i] = WORD_FUNCTION, ++functions, template_of.function_word = i;
        else if (word == range)
            template_of.kinds[i] = WORD_RANGE, ++ranges;
        else if (word == Py_None || word == binding)
            template_of.kinds[i] = WORD_REFERENCE;
        else if ((uintptr_t)word < 4096)
            template_of.kinds[i] = WORD_COPY; /* NULL or a flag */
        else {
            Py_DECREF(binding);
            return; /* a reference this does not know */
        }
    }
    if (functions != 1 || ranges != 1) {
        Py_DECREF(binding);
        return;
    }
    /* The binding string stays the template's (one reference for the process). */
    filled = ranged_fill(type, function, range);
    if (filled == NULL) {
        PyErr_Clear();
        return;
    }
    Py_XSETREF(RANGED_FIELDS(filled)->message, Py_XNewRef(RANGED_FIELDS(made)->message));
    template_of.usable =
        memcmp((void**)filled + template_of.first, words + template_of.first,
               (size_t)(template_of.end - template_of.first) * sizeof(void*)) == 0 &&
        memcmp(RANGED_FIELDS(filled), RANGED_FIELDS(made), sizeof(ranged_fields)) == 0;
    Py_DECREF(filled);
}

/* cls(function, range), from the template where it is known to serve. */
static PyObject* ranged_new_wrapper(PyObject* cls, PyObject* function, PyObject* range,
                                    PyObject* message)
{
    PyTypeObject* type = (PyTypeObject*)cls;
    PyObject* made;

#ifndef Py_GIL_DISABLED
    if (template_of.type == type && template_of.usable) {
        made = ranged_fill(type, function, range);
        if (made != NULL && message != NULL)
            RANGED_FIELDS(made)->message = Py_NewRef(message);
        return made;
    }
#endif
    made = ranged_construct(cls, function, range);
    if (made == NULL)
        return NULL;
    if (message != NULL)
        Py_XSETREF(RANGED_FIELDS(made)->message, Py_NewRef(message));
#ifndef Py_GIL_DISABLED
    if (template_of.type == NULL)
        ranged_learn(type, made, function, range);
#endif
    return made;
}

PyObject* ranged_wrapped_of(PyObject* wrapper)
{
#ifndef Py_GIL_DISABLED
    if (template_of.usable && Py_TYPE(wrapper) == template_of.type)
        return (PyObject*)((void**)wrapper)[template_of.function_word];
#endif
    (void)wrapper;
    return NULL;
}

PyObject* ranged_make(PyObject* cls, PyObject* function, RangeObject* range)
{
    if (!PyType_Check(cls) || ((PyTypeObject*)cls)->tp_init != ranged_init) {
        PyErr_SetString(PyExc_TypeError, "ranged_make: cls must come from ranged_function_type");
        return NULL;
    }
    if (!PyFunction_Check(function) || !ranged_ready(function))
        Py_RETURN_NONE;
    return ranged_new_wrapper(cls, function, (PyObject*)range, NULL);
}

/* The style of the last pending wrapper made: a walk makes every wrapper of a module in one
 * style, so consecutive ones share it. */
static PendingStyleObject* last_style;

static PyObject* pending_style(nvtxDomainHandle_t domain, PyObject* domain_name, unsigned long color,
                               unsigned long category)
{
    PendingStyleObject* style = last_style;
    if (style != NULL && style->domain == domain && style->color == color &&
        style->category == category && style->domain_name == domain_name)
        return Py_NewRef((PyObject*)style);
    style = (PendingStyleObject*)pending_style_new(domain, domain_name, color, category);
    if (style == NULL)
        return NULL;
    Py_XSETREF(last_style, (PendingStyleObject*)Py_NewRef((PyObject*)style));
    return (PyObject*)style;
}

PyObject* ranged_make_pending(PyObject* cls, PyObject* function, nvtxDomainHandle_t domain,
                              PyObject* domain_name, PyObject* message, unsigned long color,
                              unsigned long category)
{
    PyObject* style;
    PyObject* wrapper;

    if (!PyType_Check(cls) || ((PyTypeObject*)cls)->tp_init != ranged_init) {
        PyErr_SetString(PyExc_TypeError, "ranged_make_pending: cls must come from ranged_function_type");
        return NULL;
    }
    if (!PyFunction_Check(function) || !ranged_ready(function))
        Py_RETURN_NONE;
    style = pending_style(domain, domain_name, color, category);
    if (style == NULL)
        return NULL;
    wrapper = ranged_new_wrapper(cls, function, style, message);
    Py_DECREF(style);
    return wrapper;
}

static PyMethodDef ranged_methods[] = {
    {"ranged_function_type", (PyCFunction)(void (*)(void))ranged_function_type, METH_FASTCALL,
     ranged_function_type_doc},
    {"ranged_wrapper", (PyCFunction)(void (*)(void))ranged_wrapper, METH_FASTCALL, ranged_wrapper_doc},
    {NULL, NULL, 0, NULL},
};

int ranged_add_to_module(PyObject* module)
{
    return PyModule_AddFunctions(module, ranged_methods);
}
