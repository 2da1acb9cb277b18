/*
 * A range around each resumption of a generator or async generator, for the wrapper engine
 * (Python 3.10+); coroutines take a proxy instead (coroutine.c).
 *
 * What a wrapped generator function returns must stay a real generator (inspect.isgenerator,
 * types.GeneratorType, `yield from`, asyncio's checks for generator-based coroutines), so the
 * object handed to the program is made by a two-line Python driver from resumptions.py:
 * `return (yield from steps)` (3.12+: through steps.returned, see Steps_iternext). `steps`, a
 * RangedSteps, is the native part: the driver's SEND reaches its am_send (3.10, 3.11:
 * PyIter_Send) or its tp_iternext and send method (3.12+), and the driver's throw() and
 * close() reach its throw and close methods (genobject.c, _gen_throw and gen_close_iter, for a
 * delegate that is not a generator); each pushes the range, resumes the driven object and
 * pops. Nothing yielded or sent is kept while suspended. An async generator's driver is a
 * Python loop awaiting a RangedSteps around each asend/athrow/aclose awaitable.
 *
 * A coroutine's steps (Range.steps() given one) closed or dropped before they ever ran: the
 * finalizer here closes the driven coroutine, which would otherwise warn "coroutine ... was
 * never awaited" although the program did nothing wrong.
 */
#include "nvtxclient.h"

#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject* inner;      /* the generator, coroutine or awaitable iterator driven */
    RangeObject* range;
    int started;          /* resumed, thrown into or closed at least once */
    int keeps_result;     /* tp_iternext keeps a returned value for result() */
    PyObject* result;     /* what the driven object returned, when tp_iternext kept it */
} StepsObject;

static PyTypeObject StepsType;

/* resumptions.py's drivers, indexed by enum suspending_kind (set_drivers); none for
 * KIND_COROUTINE. */
static PyObject* drivers[KIND_COUNT];
static PyObject* str_throw;
static PyObject* str_close;
static PyObject* str_name;
static PyObject* str_qualname;
static PyObject* str_steps;

int suspending_kind(int co_flags)
{
    if (co_flags & CO_ASYNC_GENERATOR)
        return KIND_ASYNC_GENERATOR;
    if (co_flags & CO_COROUTINE)
        return KIND_COROUTINE;
    if (co_flags & CO_GENERATOR)
        return (co_flags & CO_ITERABLE_COROUTINE) ? KIND_ITERABLE_COROUTINE : KIND_GENERATOR;
    return -1;
}

int steps_ready(void)
{
    return drivers[KIND_COUNT - 1] != NULL;
}

PyObject* steps_new(PyObject* inner, RangeObject* range)
{
    StepsObject* self = PyObject_GC_New(StepsObject, &StepsType);
    if (self == NULL)
        return NULL;
    Py_INCREF(inner);
    self->inner = inner;
    Py_INCREF(range);
    self->range = range;
    self->started = 0;
    self->keeps_result = 0;
    self->result = NULL;
    PyObject_GC_Track(self);
    return (PyObject*)self;
}

static PySendResult steps_send(StepsObject* self, PyObject* arg, PyObject** result)
{
    RangeObject* range = self->range;
    PySendResult status;

    range_step step;

    self->started = 1;
    step = range_enter(range);
    status = PyIter_Send(self->inner, arg, result);
    range_leave(range, step);
    return status;
}

/* StopIteration(value) as the exception in flight, a tuple or exception value included. */
static void set_stop_iteration(PyObject* value)
{
    PyObject* stop;
    if (value == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
        return;
    }
    stop = PyObject_CallOneArg(PyExc_StopIteration, value);
    if (stop != NULL) {
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
    }
}

/* Python 3.12+'s SEND resumes a delegate that is not a generator through tp_iternext (when
 * sending None, as event loops and for-loops do), and a value returned comes back as
 * StopIteration(value), an exception made and caught on every call of a coroutine that
 * returns something. Instead the value is kept here and the end reported as StopIteration
 * (None) without an exception (NULL with nothing raised); the 3.12+ generator and coroutine
 * drivers then take it with result(). 3.10 and 3.11 resume through am_send, which returns the
 * value itself. Other users (the async generator driver's steps) get StopIteration(value). */
static PyObject* Steps_iternext(StepsObject* self)
{
    PyObject* result;
    switch (steps_send(self, Py_None, &result)) {
    case PYGEN_NEXT:
        return result;
    case PYGEN_RETURN:
        if (result == Py_None) {
            Py_DECREF(result);
        } else if (self->keeps_result) {
            Py_XSETREF(self->result, result);
        } else {
            set_stop_iteration(result);
            Py_DECREF(result);
        }
        return NULL;
    default:
        return NULL;
    }
}

static PyObject* Steps_result(StepsObject* self, PyObject* value)
{
    PyObject* kept = self->result;
    if (kept == NULL)
        return Py_NewRef(value);
    self->result = NULL;
    return kept;
}

static PyObject* Steps_send(StepsObject* self, PyObject* arg)
{
    PyObject* result;
    switch (steps_send(self, arg, &result)) {
    case PYGEN_NEXT:
        return result;
    case PYGEN_RETURN:
        set_stop_iteration(result);
        Py_DECREF(result);
        return NULL;
    default:
        return NULL;
    }
}

static PySendResult Steps_am_send(StepsObject* self, PyObject* arg, PyObject** result)
{
    return steps_send(self, arg, result);
}

/* inner.throw(...) inside the range, with the caller's arguments as they came: 3.12 warns
 * about the three-argument form, and only the program should cause that warning. Shared by
 * the generator driver and the coroutine proxy (coroutine.c). */
PyObject* steps_throw_into(PyObject* inner, RangeObject* range, int* started, PyObject* const* args,
                           Py_ssize_t nargs)
{
    PyObject* stack[4];
    PyObject* result;
    Py_ssize_t i;

    if (nargs < 1 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "throw expected 1 to 3 arguments, got %zd", nargs);
        return NULL;
    }
    stack[0] = inner;
    for (i = 0; i < nargs; ++i)
        stack[i + 1] = args[i];
    *started = 1;
    if (range == NULL) /* the coroutine proxy's call range is open around it instead */
        return PyObject_VectorcallMethod(str_throw, stack, (size_t)nargs + 1, NULL);
    {
        range_step step = range_enter(range);
        result = PyObject_VectorcallMethod(str_throw, stack, (size_t)nargs + 1, NULL);
        range_leave(range, step);
    }
    return result;
}

static PyObject* Steps_throw(StepsObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    return steps_throw_into(self->inner, self->range, &self->started, args, nargs);
}

static PyObject* Steps_close(StepsObject* self, PyObject* unused)
{
    RangeObject* range = self->range;
    PyObject* result;
    (void)unused;

    range_step step;

    self->started = 1;
    step = range_enter(range);
    result = PyObject_CallMethodNoArgs(self->inner, str_close);
    range_leave(range, step);
    return result;
}

static void Steps_finalize(StepsObject* self)
{
    PyObject* closed;

    if (self->started || self->inner == NULL || !PyCoro_CheckExact(self->inner))
        return;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject* raised = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
#endif
    closed = PyObject_CallMethodNoArgs(self->inner, str_close);
    if (closed == NULL)
        PyErr_WriteUnraisable(self->inner);
    Py_XDECREF(closed);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(raised);
#else
    PyErr_Restore(type, value, traceback);
#endif
}

static int Steps_traverse(StepsObject* self, visitproc visit, void* arg)
{
    Py_VISIT(self->inner);
    Py_VISIT(self->range);
    Py_VISIT(self->result);
    return 0;
}

static int Steps_clear(StepsObject* self)
{
    Py_CLEAR(self->inner);
    Py_CLEAR(self->range);
    Py_CLEAR(self->result);
    return 0;
}

static void Steps_dealloc(StepsObject* self)
{
    if (PyObject_CallFinalizerFromDealloc((PyObject*)self) < 0)
        return; /* resurrected */
    PyObject_GC_UnTrack(self);
    Steps_clear(self);
    PyObject_GC_Del(self);
}

static PyObject* Steps_self(PyObject* self)
{
    Py_INCREF(self);
    return self;
}

static PyObject* Steps_new(PyTypeObject* type, PyObject* args, PyObject* kwds)
{
    PyObject *inner, *range;
    (void)type;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "RangedSteps takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "RangedSteps", 2, 2, &inner, &range))
        return NULL;
    if (!Py_IS_TYPE(range, &RangeType) || ((RangeObject*)range)->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "RangedSteps needs an initialized Range");
        return NULL;
    }
    return steps_new(inner, (RangeObject*)range);
}

static PyMethodDef Steps_methods[] = {
    {"send", (PyCFunction)Steps_send, METH_O, "Resume the driven object with a value, in the range."},
    {"throw", (PyCFunction)(void (*)(void))Steps_throw, METH_FASTCALL,
     "Throw into the driven object, in the range."},
    {"close", (PyCFunction)Steps_close, METH_NOARGS, "Close the driven object, in the range."},
    {"result", (PyCFunction)Steps_result, METH_O,
     "result(value, /)\n--\n\nWhat the driven object returned if iteration ended it (taken "
     "once), else `value` (what `yield from`/`await` on this object gave)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Steps_members[] = {
    /* A slot the drivers' bytecode reads without a call (3.12's LOAD_ATTR_SLOT); None until
     * iteration ended the driven object with a value other than None. */
    {"returned", T_OBJECT, offsetof(StepsObject, result), READONLY,
     "What the driven object returned when iteration ended it, else None."},
    {NULL, 0, 0, 0, NULL},
};

static PyAsyncMethods Steps_async = {
    .am_await = (unaryfunc)Steps_self,
    .am_send = (sendfunc)Steps_am_send,
};

static PyTypeObject StepsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.RangedSteps",
    .tp_basicsize = sizeof(StepsObject),
    .tp_dealloc = (destructor)Steps_dealloc,
    .tp_as_async = &Steps_async,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = PyDoc_STR("RangedSteps(inner, range, /)\n--\n\n"
                        "Drives `inner` (a generator, coroutine or awaitable iterator) with "
                        "`range` pushed around each resumption; awaitable and iterable."),
    .tp_traverse = (traverseproc)Steps_traverse,
    .tp_clear = (inquiry)Steps_clear,
    .tp_iter = Steps_self,
    .tp_iternext = (iternextfunc)Steps_iternext,
    .tp_methods = Steps_methods,
    .tp_members = Steps_members,
    .tp_new = Steps_new,
    .tp_finalize = (destructor)Steps_finalize,
};

static int is_generator_like(PyObject* op)
{
    return PyGen_CheckExact(op) || PyCoro_CheckExact(op) || Py_IS_TYPE(op, &PyAsyncGen_Type);
}

/* The outer object shows the driven one's names (reprs, asyncio task reprs, the "never
 * awaited" warning). */
static int copy_names(PyObject* outer, PyObject* inner)
{
    PyObject* names[2] = {str_name, str_qualname};
    int i;
    if (is_generator_like(outer) && is_generator_like(inner)) {
        /* The fields their __name__ and __qualname__ setters write (genobject.c): generators,
         * coroutines and async generators share this head (_PyGenObject_HEAD, public in
         * 3.10-3.13), and a driver's call made them fresh. */
        PyGenObject* to = (PyGenObject*)outer;
        PyGenObject* from = (PyGenObject*)inner;
        Py_XSETREF(to->gi_name, Py_NewRef(from->gi_name));
        Py_XSETREF(to->gi_qualname, Py_NewRef(from->gi_qualname));
        return 0;
    }
    for (i = 0; i < 2; ++i) {
        PyObject* value = PyObject_GetAttr(inner, names[i]);
        int failed = value == NULL || PyObject_SetAttr(outer, names[i], value) < 0;
        Py_XDECREF(value);
        if (failed)
            return -1;
    }
    return 0;
}

static PyTypeObject* expected_type(int kind)
{
    switch (kind) {
    case KIND_COROUTINE:
        return &PyCoro_Type;
    case KIND_ASYNC_GENERATOR:
        return &PyAsyncGen_Type;
    default:
        return &PyGen_Type;
    }
}

PyObject* steps_drive(RangeObject* range, PyObject* inner, int kind)
{
    PyObject* outer;
    PyObject* args[2];

    if (inner == NULL || !range->enabled || Py_TYPE(inner) != expected_type(kind))
        return inner; /* a decorator in between changed what the call returns, or no tool */
    if (kind == KIND_COROUTINE)
        return coroutine_proxy_new(inner, range);
    if (drivers[kind] == NULL)
        return inner;
    args[0] = inner;
    if (kind == KIND_ASYNC_GENERATOR)
        args[1] = PyObject_GetAttr((PyObject*)range, str_steps);
    else {
        args[1] = steps_new(inner, range);
#if PY_VERSION_HEX >= 0x030C0000
        if (args[1] != NULL)
            ((StepsObject*)args[1])->keeps_result = 1; /* the drivers call result() */
#endif
    }
    if (args[1] == NULL) {
        Py_DECREF(inner);
        return NULL;
    }
    /* driver(steps), or driver(inner, range.steps) for an async generator. */
    if (kind == KIND_ASYNC_GENERATOR)
        outer = PyObject_Vectorcall(drivers[kind], args, 2, NULL);
    else
        outer = PyObject_Vectorcall(drivers[kind], args + 1, 1, NULL);
    Py_DECREF(args[1]);
    if (outer != NULL && copy_names(outer, inner) < 0)
        Py_CLEAR(outer);
    Py_DECREF(inner);
    return outer;
}

PyDoc_STRVAR(set_drivers_doc,
"set_drivers(generator, iterable_coroutine, async_generator, /)\n--\n\n"
"The Python functions that make what a wrapped generator or async generator function returns:\n"
"the first two take a RangedSteps, the last (inner, range.steps). Coroutines need none.");

static PyObject* set_drivers(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    static const int kinds[] = {KIND_GENERATOR, KIND_ITERABLE_COROUTINE, KIND_ASYNC_GENERATOR};
    const Py_ssize_t count = (Py_ssize_t)(sizeof kinds / sizeof kinds[0]);
    Py_ssize_t i;
    (void)module;
    if (nargs != count) {
        PyErr_Format(PyExc_TypeError, "set_drivers expected %zd functions", count);
        return NULL;
    }
    for (i = 0; i < nargs; ++i) {
        if (!PyCallable_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "set_drivers: drivers must be callable");
            return NULL;
        }
    }
    for (i = 0; i < nargs; ++i) {
        Py_INCREF(args[i]);
        Py_XSETREF(drivers[kinds[i]], args[i]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef steps_methods[] = {
    {"set_drivers", (PyCFunction)(void (*)(void))set_drivers, METH_FASTCALL, set_drivers_doc},
    {NULL, NULL, 0, NULL},
};

int steps_add_to_module(PyObject* module)
{
    str_throw = PyUnicode_InternFromString("throw");
    str_close = PyUnicode_InternFromString("close");
    str_name = PyUnicode_InternFromString("__name__");
    str_qualname = PyUnicode_InternFromString("__qualname__");
    str_steps = PyUnicode_InternFromString("steps");
    if (str_throw == NULL || str_close == NULL || str_name == NULL || str_qualname == NULL ||
        str_steps == NULL || PyType_Ready(&StepsType) < 0 ||
        coroutine_proxy_ready() < 0)
        return -1;
    Py_INCREF(&StepsType);
    if (PyModule_AddObject(module, "RangedSteps", (PyObject*)&StepsType) < 0) {
        Py_DECREF(&StepsType);
        return -1;
    }
    return PyModule_AddFunctions(module, steps_methods);
}
