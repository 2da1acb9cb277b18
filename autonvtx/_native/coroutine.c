/*
 * RangedCoroutine: what a wrapped coroutine function's call returns under the wrapper engine
 * (Python 3.10+), the program's own coroutine behind a proxy that gives it its range: one
 * start/end range from its first resumption to its return, exception, close or collection
 * (`coroutine = "call"`, the default), or a range pushed around each of its resumptions
 * (`coroutine = "resumptions"`): no driver coroutine, no Python frame of ours.
 *
 * The proxy reads as the coroutine everywhere a program can tell. `__class__` is types.CoroutineType, so isinstance() checks (inspect.iscoroutine,
 * asyncio.iscoroutine and with it asyncio.run, tasks and types.coroutine's own check) accept
 * it; every other attribute (cr_frame, cr_await, cr_code, cr_running, names) is the
 * coroutine's own; `await` takes it through am_await (itself: CPython refuses a coroutine
 * from __await__) and then am_send (3.10, 3.11 and asyncio's tasks: PyIter_Send) or
 * tp_iternext (3.12+'s SEND, sending None); none of our frames shows in tracebacks. A proxy dropped unawaited drops the coroutine, which warns "never awaited"
 * with its own name, as plain Python does; one closed before it ran closes it quietly.
 * `yield from` takes it inside a generator-based coroutine, as it takes a coroutine.
 */
#include "nvtxclient.h"

#include <stddef.h>

static PyObject* str_close;

typedef struct {
    PyObject_HEAD
    PyObject* inner;      /* the program's coroutine */
    RangeObject* range;
    int started;          /* resumed or thrown into at least once */
    int spanning;         /* the call's one range is open (`span`) */
    nvtxRangeId_t span;
    unsigned long long begun; /* when it opened, while --budget measures its range; else 0 */
    unsigned long long span_cost; /* the start's own time then */
    PyObject* weakrefs;
} ProxyObject;

/* The call's one range, opened at the first resumption (a coroutine never awaited runs
 * nothing and gets no range) and closed once, whichever way the coroutine ends. */
static inline void proxy_span_begin(ProxyObject* self)
{
    if (!self->started) {
        self->started = 1;
        if (self->range->off) /* --budget turned its function off */
            return;
        if (self->range->measure_left > 0) {
            unsigned long long before = budget_now();
            self->span = range_start(self->range);
            self->begun = budget_now();
            self->span_cost = self->begun - before;
        } else
            self->span = range_start(self->range);
        self->spanning = 1;
    }
}

static inline void proxy_span_end(ProxyObject* self)
{
    if (self->spanning) {
        self->spanning = 0;
        if (self->begun != 0) {
            /* The call's whole time, its awaits included, against its start and end. */
            unsigned long long end = budget_now();
            range_end(self->range, self->span);
            budget_account(self->range, end - self->begun, self->span_cost + (budget_now() - end));
            self->begun = 0;
        } else
            range_end(self->range, self->span);
    }
}

static PyTypeObject ProxyType;

/* StopIteration(value) raised, `value` returned by the coroutine: made through the type's
 * tp_new with the value set as its __init__ would set it, which skips the call machinery and
 * argument parsing. 3.12+'s `await` of a coroutine that returns something other than None
 * pays for one (SEND reads the value from it): a driver avoided it only at the cost of a
 * frame. */
static void raise_stop_iteration(PyObject* value)
{
    PyTypeObject* type = (PyTypeObject*)PyExc_StopIteration;
    PyObject* args;
    PyObject* stop;

    if (value == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
        return;
    }
    args = PyTuple_Pack(1, value);
    if (args == NULL)
        return;
    stop = type->tp_new(type, args, NULL);
    Py_DECREF(args);
    if (stop == NULL)
        return;
    Py_XSETREF(((PyStopIterationObject*)stop)->value, Py_NewRef(value));
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(stop);
#else
    PyErr_Restore(Py_NewRef(PyExc_StopIteration), stop, NULL);
#endif
}

/* What tp_iternext raises when the coroutine returned a value: 3.12+'s SEND resumes an
 * awaited object that is not a generator through tp_iternext and takes a returned value only
 * from a StopIteration, which it reads and drops at once. Making and freeing one costs about
 * as much as the rest of the call (100 ns on 3.12), so this subclass keeps a few freed ones
 * for reuse: a freed one has released its value (no object lives longer than under plain
 * Python), and is made fresh (refcount, GC tracking) when reused. Only an explicit next() on
 * the proxy, which a real coroutine refuses, would show the subclass to a program. */
static PyTypeObject ReturnType;

#define RETURN_POOL 16
static PyObject* return_pool[RETURN_POOL];
static int return_pooled;

static void Return_dealloc(PyObject* self)
{
    PyObject_GC_UnTrack(self);
    ReturnType.tp_clear(self); /* StopIteration's: value, args, traceback, context... */
    if (return_pooled < RETURN_POOL) {
        return_pool[return_pooled++] = self;
        return;
    }
    PyObject_GC_Del(self);
}

static PyObject* Return_get_args(PyBaseExceptionObject* self, void* closure)
{
    PyObject* value = ((PyStopIterationObject*)self)->value;
    (void)closure;
    if (self->args != NULL && PyTuple_GET_SIZE(self->args) == 0 && value != NULL)
        return PyTuple_Pack(1, value);
    return Py_NewRef(self->args != NULL ? self->args : Py_None);
}

static PyGetSetDef Return_getset[] = {
    {"args", (getter)Return_get_args, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReturnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.CoroutineReturn",
    .tp_basicsize = sizeof(PyStopIterationObject),
    .tp_dealloc = Return_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = PyDoc_STR("StopIteration(value) of a wrapped coroutine's return."),
    .tp_getset = Return_getset,
};

static int return_type_ready(void)
{
    PyTypeObject* base = (PyTypeObject*)PyExc_StopIteration;
    ReturnType.tp_base = base;
    ReturnType.tp_traverse = base->tp_traverse;
    ReturnType.tp_clear = base->tp_clear;
    return PyType_Ready(&ReturnType);
}

/* CoroutineReturn(value) raised, pooled when one is free. Its args stay the empty tuple (no
 * tuple made per call; `args` reads (value,) all the same). */
static void raise_return(PyObject* value)
{
    PyBaseExceptionObject* stop;
    PyObject* no_args = PyTuple_New(0); /* CPython's one empty tuple */

    if (no_args == NULL)
        return;
    if (return_pooled > 0) {
        stop = (PyBaseExceptionObject*)return_pool[--return_pooled];
        PyObject_Init((PyObject*)stop, &ReturnType);
        stop->suppress_context = 0;
        stop->args = no_args;
        ((PyStopIterationObject*)stop)->value = Py_NewRef(value);
        PyObject_GC_Track(stop);
    } else {
        stop = (PyBaseExceptionObject*)ReturnType.tp_new(&ReturnType, no_args, NULL);
        Py_DECREF(no_args);
        if (stop == NULL)
            return;
        Py_XSETREF(((PyStopIterationObject*)stop)->value, Py_NewRef(value));
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException((PyObject*)stop);
#else
    PyErr_Restore(Py_NewRef((PyObject*)&ReturnType), (PyObject*)stop, NULL);
#endif
}

/* Freed proxies kept for reuse, as CPython keeps freed tuples and frames: one is made and
 * freed per call of a wrapped coroutine function (memory, not the GC's work, is saved). */
#define PROXY_POOL 16
static ProxyObject* proxy_pool[PROXY_POOL];
static int proxies_pooled;

PyObject* coroutine_proxy_new(PyObject* inner, RangeObject* range)
{
    ProxyObject* self;

    if (proxies_pooled > 0) {
        self = proxy_pool[--proxies_pooled];
        PyObject_Init((PyObject*)self, &ProxyType);
    } else if ((self = PyObject_GC_New(ProxyObject, &ProxyType)) == NULL) {
        Py_DECREF(inner);
        return NULL;
    }
    self->inner = inner; /* stolen */
    Py_INCREF(range);
    self->range = range;
    self->started = 0;
    self->spanning = 0;
    self->begun = 0;
    self->weakrefs = NULL;
    PyObject_GC_Track(self);
    return (PyObject*)self;
}

static PySendResult Proxy_am_send(ProxyObject* self, PyObject* arg, PyObject** result)
{
    RangeObject* range = self->range;
    PySendResult status;

    if (!range->coroutine_steps) {
        proxy_span_begin(self);
        status = PyIter_Send(self->inner, arg, result);
        if (status != PYGEN_NEXT) /* returned or raised: the call is over */
            proxy_span_end(self);
        return status;
    }
    {
        range_step step;
        self->started = 1;
        step = range_enter(range);
        status = PyIter_Send(self->inner, arg, result);
        range_leave(range, step);
    }
    return status;
}

static PyObject* Proxy_iternext(ProxyObject* self)
{
    PyObject* result;
    switch (Proxy_am_send(self, Py_None, &result)) {
    case PYGEN_NEXT:
        return result;
    case PYGEN_RETURN:
        /* None ends without an exception (NULL, nothing raised): SEND and next() read it
         * as StopIteration(None). */
        if (result != Py_None)
            raise_return(result);
        Py_DECREF(result);
        return NULL;
    default:
        return NULL;
    }
}

static PyObject* Proxy_send(ProxyObject* self, PyObject* arg)
{
    PyObject* result;
    switch (Proxy_am_send(self, arg, &result)) {
    case PYGEN_NEXT:
        return result;
    case PYGEN_RETURN:
        raise_stop_iteration(result);
        Py_DECREF(result);
        return NULL;
    default:
        return NULL;
    }
}

/* `await proxy`: itself, unless the coroutine is suspended in an await already (a second
 * awaiter), which CPython refuses for a coroutine with this message (ceval's GET_AWAITABLE). */
static PyObject* Proxy_await(ProxyObject* self)
{
    if (self->started) {
        PyObject* awaiting = PyObject_GetAttrString(self->inner, "cr_await");
        int busy = awaiting != NULL && awaiting != Py_None;
        Py_XDECREF(awaiting);
        if (awaiting == NULL)
            return NULL;
        if (busy) {
            PyErr_SetString(PyExc_RuntimeError, "coroutine is being awaited already");
            return NULL;
        }
    }
    return Py_NewRef(self);
}

/* `yield from proxy` inside a generator-based coroutine (types.coroutine): ceval's
 * GET_YIELD_FROM_ITER takes an exact coroutine as its own iterator there, and anything else
 * through iter(); this answers iter() as that rule answers for the coroutine. Elsewhere it
 * raises what CPython raises for a coroutine: `yield from` in a plain generator, iter()
 * anywhere else. (The type has the slot but no `__iter__`, as a coroutine: see
 * coroutine_proxy_ready; collections.abc.Iterable does not take it.) */
static PyObject* Proxy_iter(ProxyObject* self)
{
    PyFrameObject* frame = PyEval_GetFrame(); /* the caller's: this runs in no frame of ours */
    int flags = 0;
    if (frame != NULL) {
        PyCodeObject* code = PyFrame_GetCode(frame);
        flags = code->co_flags;
        Py_DECREF(code);
    }
    if (flags & CO_ITERABLE_COROUTINE)
        return Py_NewRef(self);
    if (flags & CO_GENERATOR)
        PyErr_SetString(PyExc_TypeError,
                        "cannot 'yield from' a coroutine object in a non-coroutine generator");
    else
        PyErr_SetString(PyExc_TypeError, "'coroutine' object is not iterable");
    return NULL;
}

static PyObject* Proxy_throw(ProxyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    PyObject* result;
    if (self->range->coroutine_steps)
        return steps_throw_into(self->inner, self->range, &self->started, args, nargs);
    /* A cancellation (asyncio throws CancelledError in) ends the call unless the coroutine
     * catches it and suspends again. */
    proxy_span_begin(self);
    result = steps_throw_into(self->inner, NULL, &self->started, args, nargs);
    if (result == NULL)
        proxy_span_end(self);
    return result;
}

/* close(): a range only when the coroutine ran (closing one that never did runs nothing). */
static PyObject* Proxy_close(ProxyObject* self, PyObject* unused)
{
    RangeObject* range = self->range;
    PyObject* result;
    (void)unused;

    if (!self->started)
        return PyObject_CallMethodNoArgs(self->inner, str_close);
    if (!range->coroutine_steps) {
        result = PyObject_CallMethodNoArgs(self->inner, str_close);
        proxy_span_end(self);
        return result;
    }
    {
        range_step step = range_enter(range);
        result = PyObject_CallMethodNoArgs(self->inner, str_close);
        range_leave(range, step);
    }
    return result;
}

static PyObject* Proxy_get_class(ProxyObject* self, void* closure)
{
    (void)self;
    (void)closure;
    return Py_NewRef((PyObject*)&PyCoro_Type);
}

/* The coroutine's own attributes, read (and its names written) through to it. A getset per
 * name rather than a tp_getattro that falls back to it: with the generic tp_getattro the
 * interpreter's method caches serve `coro.send(...)`, which event loops call on every step. */
static PyObject* Proxy_get_inner(ProxyObject* self, void* name)
{
    return PyObject_GetAttrString(self->inner, (const char*)name);
}

static int Proxy_set_inner(ProxyObject* self, PyObject* value, void* name)
{
    return PyObject_SetAttrString(self->inner, (const char*)name, value);
}

static PyObject* Proxy_repr(ProxyObject* self)
{
    return PyObject_Repr(self->inner);
}

static int Proxy_traverse(ProxyObject* self, visitproc visit, void* arg)
{
    Py_VISIT(self->inner);
    Py_VISIT(self->range);
    return 0;
}

static int Proxy_clear(ProxyObject* self)
{
    /* Dropped while suspended: the coroutine goes with it (its finalizer closes it, running
     * its `finally` blocks inside the call's range), then the call's range ends. */
    Py_CLEAR(self->inner);
    if (self->spanning && self->range != NULL)
        proxy_span_end(self);
    Py_CLEAR(self->range);
    return 0;
}

static void Proxy_dealloc(ProxyObject* self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject*)self);
    Proxy_clear(self);
    if (proxies_pooled < PROXY_POOL) {
        proxy_pool[proxies_pooled++] = self;
        return;
    }
    PyObject_GC_Del(self);
}

static PyMethodDef Proxy_methods[] = {
    {"send", (PyCFunction)Proxy_send, METH_O, "Resume the coroutine with a value, in the range."},
    {"throw", (PyCFunction)(void (*)(void))Proxy_throw, METH_FASTCALL,
     "Throw into the coroutine, in the range."},
    {"close", (PyCFunction)Proxy_close, METH_NOARGS, "Close the coroutine."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Proxy_getset[] = {
    {"__class__", (getter)Proxy_get_class, NULL, NULL, NULL},
    {"__name__", (getter)Proxy_get_inner, (setter)Proxy_set_inner, NULL, "__name__"},
    {"__qualname__", (getter)Proxy_get_inner, (setter)Proxy_set_inner, NULL, "__qualname__"},
    {"cr_await", (getter)Proxy_get_inner, NULL, NULL, "cr_await"},
    {"cr_frame", (getter)Proxy_get_inner, NULL, NULL, "cr_frame"},
    {"cr_running", (getter)Proxy_get_inner, NULL, NULL, "cr_running"},
    {"cr_code", (getter)Proxy_get_inner, NULL, NULL, "cr_code"},
    {"cr_origin", (getter)Proxy_get_inner, NULL, NULL, "cr_origin"},
#if PY_VERSION_HEX >= 0x030B0000
    {"cr_suspended", (getter)Proxy_get_inner, NULL, NULL, "cr_suspended"},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyAsyncMethods Proxy_async = {
    .am_await = (unaryfunc)Proxy_await,
    .am_send = (sendfunc)Proxy_am_send,
};

static PyTypeObject ProxyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.RangedCoroutine",
    .tp_basicsize = sizeof(ProxyObject),
    .tp_dealloc = (destructor)Proxy_dealloc,
    .tp_as_async = &Proxy_async,
    .tp_repr = (reprfunc)Proxy_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Proxy_traverse,
    .tp_clear = (inquiry)Proxy_clear,
    .tp_weaklistoffset = offsetof(ProxyObject, weakrefs),
    .tp_iter = (getiterfunc)Proxy_iter,
    .tp_iternext = (iternextfunc)Proxy_iternext,
    .tp_methods = Proxy_methods,
    .tp_getset = Proxy_getset,
};

int coroutine_proxy_ready(void)
{
    str_close = PyUnicode_InternFromString("close");
    if (str_close == NULL || return_type_ready() < 0 || PyType_Ready(&ProxyType) < 0)
        return -1;
    /* The slot without the attribute: a coroutine has no `__iter__` (hasattr, and
     * collections.abc.Iterable, which looks for it in the class dictionaries, say no). */
    if (PyDict_DelItemString(ProxyType.tp_dict, "__iter__") < 0)
        return -1;
    PyType_Modified(&ProxyType);
    return 0;
}
