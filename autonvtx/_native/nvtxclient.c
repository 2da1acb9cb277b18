/*
 * autonvtx._nvtxclient: autonvtx's own NVTX client, a CPython extension module.
 *
 * It compiles the NVTX v3 headers with their implementation, so it is one more NVTX client
 * in the process: on its first NVTX call it loads the tool $NVTX_INJECTION64_PATH names
 * (Nsight Systems, autonvtx's recorder) or, with none, turns every entry point into a no-op.
 * Only autonvtx/ranges.py imports it; a pure-Python path in ranges.py produces the same
 * events when it is missing.
 *
 * Range: one function's range, prepared once (domain handle, registered message, ARGB color,
 * category in an nvtxEventAttributes_t). push()/pop() for the Python generator drivers; called
 * as wrapt calls a wrapper, `range(wrapped, instance, args, kwargs)`, it pushes, calls and pops.
 *
 * ranged_function_type(base): a subclass of autonvtx's wrapt FunctionWrapper for plain Python
 * functions whose call is a vectorcall in C (push, call the function with the caller's
 * arguments untouched, pop on every exit path), bypassing wrapt's tp_call (a dict and a
 * 4-tuple per call, then a call of the wrapper), and which binds like a function: __get__
 * gives a bound method, and Py_TPFLAGS_METHOD_DESCRIPTOR lets `obj.method(x)` skip making
 * one, exactly as CPython does for functions (PEP 590).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <nvtx3/nvToolsExt.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

PyDoc_STRVAR(name_os_thread_doc,
"name_os_thread(tid, name, /)\n--\n\n"
"Name the OS thread `tid` (a native thread id, threading.get_native_id()) for NVTX tools\n"
"(nvtxNameOsThreadA).");

static PyObject* name_os_thread(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    unsigned long tid;
    const char* name;
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "name_os_thread expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    tid = PyLong_AsUnsignedLong(args[0]);
    if (tid == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (tid > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "name_os_thread: tid does not fit in 32 bits");
        return NULL;
    }
    if (!PyUnicode_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "name_os_thread: name must be str, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL)
        return NULL;
    nvtxNameOsThreadA((uint32_t)tid, name);
    Py_RETURN_NONE;
}

/* ---- Range ---- */

typedef struct {
    PyObject_HEAD
    nvtxDomainHandle_t domain;
    nvtxEventAttributes_t attributes;
    int enabled;        /* a tool is attached: NVTX gave this client a domain handle */
    PyObject* domain_name;
    PyObject* message;
    vectorcallfunc vectorcall;
} RangeObject;

static PyTypeObject RangeType;

/* Fill a fresh Range: domain handle, registered message and the event attributes. */
static int range_prepare(RangeObject* self, PyObject* domain_name, PyObject* message,
                         unsigned long color, unsigned long category)
{
    nvtxStringHandle_t registered;
    const char* domain_utf8 = PyUnicode_AsUTF8(domain_name);
    const char* message_utf8 = PyUnicode_AsUTF8(message);

    if (domain_utf8 == NULL || message_utf8 == NULL)
        return -1;
    if (*domain_utf8 == '\0') {
        PyErr_SetString(PyExc_ValueError, "Range: the domain needs a name");
        return -1;
    }
    /* With no tool attached every NVTX call is a no-op returning 0: a NULL handle is how this
     * client learns that nobody listens (nvtx's Python Domain asks nvtxDomainIsEnabled). */
    self->domain = nvtxDomainCreateA(domain_utf8);
    self->enabled = self->domain != NULL;
    registered = self->enabled ? nvtxDomainRegisterStringA(self->domain, message_utf8) : NULL;

    memset(&self->attributes, 0, sizeof self->attributes);
    self->attributes.version = NVTX_VERSION;
    self->attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    /* The same fields nvtx's EventAttributes sets: ARGB color always, category 0 = none. */
    self->attributes.colorType = NVTX_COLOR_ARGB;
    self->attributes.color = (uint32_t)color;
    self->attributes.category = (uint32_t)category;
    self->attributes.payloadType = NVTX_PAYLOAD_UNKNOWN;
    if (registered != NULL) {
        self->attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        self->attributes.message.registered = registered;
    } else {
        self->attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        self->attributes.message.ascii = NULL;
    }
    Py_INCREF(domain_name);
    self->domain_name = domain_name;
    Py_INCREF(message);
    self->message = message;
    return 0;
}

static int Range_init(RangeObject* self, PyObject* args, PyObject* kwds)
{
    static char* keywords[] = {"domain", "message", "color", "category", NULL};
    PyObject* domain_name;
    PyObject* message;
    unsigned long color = 0;
    unsigned long category = 0;

    if (self->domain_name != NULL) {
        PyErr_SetString(PyExc_TypeError, "Range is initialized once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UU|kk:Range", keywords,
                                     &domain_name, &message, &color, &category))
        return -1;
    return range_prepare(self, domain_name, message, color, category);
}

static void Range_dealloc(RangeObject* self)
{
    /* The domain handle is never destroyed: other Ranges and nvtx's own Domain objects in this
     * process may hold the same name, and NVTX domains live as long as the process anyway. */
    Py_XDECREF(self->domain_name);
    Py_XDECREF(self->message);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static inline void range_push(RangeObject* r)
{
    if (r->enabled)
        nvtxDomainRangePushEx(r->domain, &r->attributes);
}

static inline void range_pop(RangeObject* r)
{
    if (r->enabled)
        nvtxDomainRangePop(r->domain);
}

static PyObject* Range_push(RangeObject* self, PyObject* unused)
{
    (void)unused;
    range_push(self);
    Py_RETURN_NONE;
}

static PyObject* Range_pop(RangeObject* self, PyObject* unused)
{
    (void)unused;
    range_pop(self);
    Py_RETURN_NONE;
}

/* wrapt's wrapper protocol: range(wrapped, instance, args, kwargs). */
static PyObject* Range_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                                  PyObject* kwnames)
{
    RangeObject* self = (RangeObject*)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject* call_args;
    PyObject* call_kwargs;
    PyObject* result;

    if (self->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "Range is not initialized");
        return NULL;
    }
    if (nargs != 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "a Range is called as wrapt calls a wrapper: (wrapped, instance, args, kwargs)");
        return NULL;
    }
    call_args = args[2];
    call_kwargs = args[3];
    if (!PyTuple_Check(call_args) || (call_kwargs != Py_None && !PyDict_Check(call_kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Range: args must be a tuple and kwargs a dict");
        return NULL;
    }
    if (call_kwargs == Py_None || PyDict_GET_SIZE(call_kwargs) == 0)
        call_kwargs = NULL;
    range_push(self);
    result = PyObject_Call(args[0], call_args, call_kwargs);
    range_pop(self);
    return result;
}

static PyObject* Range_repr(RangeObject* self)
{
    if (self->domain_name == NULL)
        return PyUnicode_FromString("<Range (uninitialized)>");
    return PyUnicode_FromFormat("<Range %R in domain %R%s>", self->message, self->domain_name,
                                self->enabled ? "" : " (no NVTX tool attached)");
}

static PyObject* Range_get_enabled(RangeObject* self, void* closure)
{
    (void)closure;
    return PyBool_FromLong(self->enabled);
}

static PyObject* Range_get_domain(RangeObject* self, void* closure)
{
    (void)closure;
    PyObject* v = self->domain_name ? self->domain_name : Py_None;
    Py_INCREF(v);
    return v;
}

static PyObject* Range_get_message(RangeObject* self, void* closure)
{
    (void)closure;
    PyObject* v = self->message ? self->message : Py_None;
    Py_INCREF(v);
    return v;
}

static PyMethodDef Range_methods[] = {
    {"push", (PyCFunction)Range_push, METH_NOARGS, "Push this range on the calling thread."},
    {"pop", (PyCFunction)Range_pop, METH_NOARGS, "Pop the innermost range of this domain on the calling thread."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Range_getset[] = {
    {"enabled", (getter)Range_get_enabled, NULL, "Whether an NVTX tool is attached to this client.", NULL},
    {"domain", (getter)Range_get_domain, NULL, "The NVTX domain's name.", NULL},
    {"message", (getter)Range_get_message, NULL, "The registered message.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject* Range_new(PyTypeObject* type, PyObject* args, PyObject* kwds)
{
    RangeObject* self = (RangeObject*)type->tp_alloc(type, 0);
    (void)args;
    (void)kwds;
    if (self != NULL)
        self->vectorcall = Range_vectorcall;
    return (PyObject*)self;
}

static PyTypeObject RangeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.Range",
    .tp_basicsize = sizeof(RangeObject),
    .tp_dealloc = (destructor)Range_dealloc,
    .tp_vectorcall_offset = offsetof(RangeObject, vectorcall),
    .tp_repr = (reprfunc)Range_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = PyDoc_STR("Range(domain, message, color=0, category=0)\n--\n\n"
                        "One function's NVTX range, prepared once: the domain handle, the "
                        "registered message, ARGB color and category id."),
    .tp_methods = Range_methods,
    .tp_getset = Range_getset,
    .tp_init = (initproc)Range_init,
    .tp_new = Range_new,
};

/* ---- the ranged function wrapper type ---- */

/* Lives right after the base's fields; the type's tp_vectorcall_offset points at it, so the
 * call path finds it without knowing which base it was made for. */
typedef struct {
    vectorcallfunc vectorcall;
    PyObject* function;   /* the plain function: called directly, not through wrapt */
    PyObject* range;      /* its Range */
} ranged_fields;

#define RANGED_FIELDS(op) ((ranged_fields*)((char*)(op) + Py_TYPE(op)->tp_vectorcall_offset))

static PyObject* ranged_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                   PyObject* kwnames)
{
    ranged_fields* fields = RANGED_FIELDS(self);
    PyObject* function = fields->function;
    PyObject* range = fields->range;
    PyObject* result;

    /* Both are writable members (subtype_dealloc and subtype_traverse only manage writable
     * T_OBJECT_EX members), so a program could have replaced or deleted them. */
    if (function == NULL || range == NULL || !Py_IS_TYPE(range, &RangeType)) {
        PyErr_SetString(PyExc_TypeError, "autonvtx: this ranged function wrapper is not initialized");
        return NULL;
    }
    if (!((RangeObject*)range)->enabled)
        return PyObject_Vectorcall(function, args, nargsf, kwnames);
    nvtxDomainRangePushEx(((RangeObject*)range)->domain, &((RangeObject*)range)->attributes);
    result = PyObject_Vectorcall(function, args, nargsf, kwnames);
    nvtxDomainRangePop(((RangeObject*)range)->domain);
    return result;
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
    if (!Py_IS_TYPE(range, &RangeType) || ((RangeObject*)range)->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "ranged function wrapper needs an initialized Range");
        return -1;
    }
    if (base == NULL || base->tp_init == NULL || base->tp_init(self, args, NULL) < 0)
        return -1;
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
        {NULL, 0, 0, 0, NULL},
    };
    /* The base's dealloc/traverse/clear are CPython's subtype_dealloc/_traverse/_clear (base
     * is a class statement's type): reused as they are, they manage our two object members
     * exactly as they manage a Python class's __slots__, and the reference to the heap type. */
    PyType_Slot slots[] = {
        {Py_tp_dealloc, (void*)base->tp_dealloc},
        {Py_tp_traverse, (void*)base->tp_traverse},
        {Py_tp_clear, (void*)base->tp_clear},
        {Py_tp_call, (void*)PyVectorcall_Call},
        {Py_tp_descr_get, (void*)ranged_descr_get},
        {Py_tp_init, (void*)ranged_init},
        {Py_tp_new, (void*)ranged_new},
        {Py_tp_members, members},
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
"ranged_function_type; None when `function` is a generator, coroutine or async generator\n"
"function (those get a range per resumption, made in Python). Instrumenting a package\n"
"wholesale makes thousands: no Python frame, no argument parsing for the Range.");

static PyObject* ranged_wrapper(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    const int suspends = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR;
    PyObject* cls;
    PyObject* function;
    RangeObject* range;
    PyObject* call_args[2];
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
    if (((PyCodeObject*)PyFunction_GET_CODE(function))->co_flags & suspends)
        Py_RETURN_NONE;
    color = PyLong_AsUnsignedLongMask(args[4]);
    if (color == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    category = PyLong_AsUnsignedLongMask(args[5]);
    if (category == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    range = (RangeObject*)Range_new(&RangeType, NULL, NULL);
    if (range == NULL)
        return NULL;
    if (range_prepare(range, args[2], args[3], color, category) < 0) {
        Py_DECREF(range);
        return NULL;
    }
    call_args[0] = function;
    call_args[1] = (PyObject*)range;
    wrapper = PyObject_Vectorcall(cls, call_args, 2, NULL);
    Py_DECREF(range);
    return wrapper;
}

PyDoc_STRVAR(push_pop_loop_doc,
"push_pop_loop(range, n, /)\n--\n\n"
"Push and pop `range` n times in C with the GIL released: what the attached tool costs per\n"
"event without the interpreter's share (benchmarks).");

static PyObject* push_pop_loop(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    RangeObject* r;
    Py_ssize_t n, i;
    (void)module;
    if (nargs != 2 || !Py_IS_TYPE(args[0], &RangeType)) {
        PyErr_SetString(PyExc_TypeError, "push_pop_loop(range: Range, n: int)");
        return NULL;
    }
    r = (RangeObject*)args[0];
    if (r->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "Range is not initialized");
        return NULL;
    }
    n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; ++i) {
        range_push(r);
        range_pop(r);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"push_pop_loop", (PyCFunction)(void (*)(void))push_pop_loop, METH_FASTCALL, push_pop_loop_doc},
    {"name_os_thread", (PyCFunction)(void (*)(void))name_os_thread, METH_FASTCALL, name_os_thread_doc},
    {"ranged_function_type", (PyCFunction)(void (*)(void))ranged_function_type, METH_FASTCALL,
     ranged_function_type_doc},
    {"ranged_wrapper", (PyCFunction)(void (*)(void))ranged_wrapper, METH_FASTCALL, ranged_wrapper_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "autonvtx._nvtxclient",
    "autonvtx's NVTX client: thread naming and the native per-call range path.",
    -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__nvtxclient(void)
{
    PyObject* module;
    if (PyType_Ready(&RangeType) < 0)
        return NULL;
    module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    Py_INCREF(&RangeType);
    if (PyModule_AddObject(module, "Range", (PyObject*)&RangeType) < 0) {
        Py_DECREF(&RangeType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
