/*
 * RangedCoroutine: what a wrapped coroutine function's call returns under the wrapper engine
 * (Python 3.10+), the program's own coroutine behind a proxy that pushes the range around
 * each of its resumptions: no driver coroutine, no Python frame of ours.
 *
 * The proxy reads as the coroutine everywhere a program can tell. `__class__` is types.CoroutineType, so isinstance() checks (inspect.iscoroutine,
 * asyncio.iscoroutine and with it asyncio.run, tasks and types.coroutine's own check) accept
 * it; every other attribute (cr_frame, cr_await, cr_code, cr_running, names) is the
 * coroutine's own; `await` takes it through am_await (itself: CPython refuses a coroutine
 * from __await__) and then am_send (3.10, 3.11 and asyncio's tasks: PyIter_Send) or
 * tp_iternext (3.12+'s SEND, sending None); none of our frames shows in tracebacks. A proxy dropped unawaited drops the coroutine, which warns "never awaited"
 * with its own name, as plain Python does; one closed before it ran closes it quietly.
 */
#include "nvtxclient.h"

#include <stddef.h>

static PyObject* str_close;

typedef struct {
    PyObject_HEAD
    PyObject* inner;      /* the program's coroutine */
    RangeObject* range;
    int started;          /* resumed or thrown into at least once */
    PyObject* weakrefs;
} ProxyObject;

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
    self->weakrefs = NULL;
    PyObject_GC_Track(self);
    return (PyObject*)self;
}

static PySendResult Proxy_am_send(ProxyObject* self, PyObject* arg, PyObject** result)
{
    RangeObject* range = self->range;
    PySendResult status;

    self->started = 1;
    range_push(range);
    status = PyIter_Send(self->inner, arg, result);
    range_pop(range);
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

static PyObject* Proxy_throw(ProxyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    return steps_throw_into(self->inner, self->range, &self->started, args, nargs);
}

/* close(): a range only when the coroutine ran (closing one that never did runs nothing). */
static PyObject* Proxy_close(ProxyObject* self, PyObject* unused)
{
    RangeObject* range = self->range;
    PyObject* result;
    (void)unused;

    if (!self->started)
        return PyObject_CallMethodNoArgs(self->inner, str_close);
    range_push(range);
    result = PyObject_CallMethodNoArgs(self->inner, str_close);
    range_pop(range);
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
    Py_CLEAR(self->inner);
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
    .tp_iternext = (iternextfunc)Proxy_iternext,
    .tp_methods = Proxy_methods,
    .tp_getset = Proxy_getset,
};

#if PY_VERSION_HEX >= 0x030C0000
/*
 * 3.12+: no proxy. A wrapped coroutine function's call runs the function's twin (a function
 * object of ours with the same code, globals, closure, defaults and names), which makes the
 * program's own coroutine, of the function's own code, in a frame whose function is the twin;
 * the code engine's sys.monitoring callbacks (monitoring.c) push and pop around each run of
 * that frame (PY_START, PY_RESUME and PY_THROW push; PY_YIELD, PY_RETURN and PY_UNWIND pop),
 * finding the range through the frame's function: a frame of the same code run by anything
 * else (the function called directly, another function sharing the code, as a decorator's
 * inner function is shared) has no twin and gets no range, as under the proxy. An `await`
 * then resumes the coroutine inline, as under plain Python: the proxy's tp_iternext, its
 * StopIteration and its re-entry into the interpreter go (3.12: 120-274 ns down to the code
 * engine's 30 or so).
 *
 * The code carries `twin_marker` as its code extra (monitoring.c's index) and the local events;
 * the twin carries its Range in its func_doc and `twin_marker` in its func_module, slots
 * nothing reads while it runs (the twin never reaches the program). ranges.CodeMonitor lends
 * the tool id and keeps the code objects to turn off (arm_coroutines in resumptions.py, called
 * once, from here, at the first call). Anywhere the frame's layout is unknown, or no tool id is
 * free, or the code engine already monitors the code, the proxy serves as before.
 */
Py_ssize_t frame_function_offset(void); /* globalevents.c: -1 where unknown */

PyObject* twin_marker;
static Py_ssize_t function_offset = -1;
enum { TWINS_UNARMED, TWINS_ARMED, TWINS_OFF };
static int twins_state = TWINS_OFF; /* TWINS_UNARMED once a hook is set */
static PyObject* arm_hook;          /* resumptions.arm_coroutines */
static PyObject* set_local_events;  /* sys.monitoring.set_local_events */
static PyObject* tool_id;
static PyObject* local_events;
static PyObject* monitored_codes;   /* the CodeMonitor's list: what its uninstall() turns off */

static inline PyObject* frame_code_and_function(PyObject** function)
{
#if PY_VERSION_HEX >= 0x030D0000
    void* frame = PyThreadState_GetUnchecked()->current_frame;
#else
    void* frame = _PyThreadState_UncheckedGet()->cframe->current_frame;
#endif
    if (frame == NULL)
        return NULL;
    *function = *(PyObject**)((char*)frame + function_offset);
    return *(PyObject**)frame;
}

/* The Range of the running frame of `code` when a twin runs it, else NULL: the callbacks'
 * lookup for code marked with twin_marker. The frame is the one the event is about (the
 * callbacks run without a frame of their own); its code is checked all the same. */
RangeObject* coroutine_frame_range(PyObject* code)
{
    PyObject* function = NULL;
    if (frame_code_and_function(&function) != code || function == NULL || !PyFunction_Check(function) ||
        ((PyFunctionObject*)function)->func_module != twin_marker)
        return NULL;
    return (RangeObject*)((PyFunctionObject*)function)->func_doc;
}

static int in_sync(PyFunctionObject* twin, PyFunctionObject* function, RangeObject* range)
{
    return twin->func_code == function->func_code && twin->func_defaults == function->func_defaults &&
           twin->func_kwdefaults == function->func_kwdefaults && twin->func_name == function->func_name &&
           twin->func_qualname == function->func_qualname && twin->func_doc == (PyObject*)range;
}

/* A new twin of `function`, its frames ranged by `range`. */
static PyObject* twin_of(PyFunctionObject* function, RangeObject* range)
{
    PyFunctionObject* twin = (PyFunctionObject*)PyFunction_NewWithQualName(
        function->func_code, function->func_globals, function->func_qualname);
    if (twin == NULL)
        return NULL;
    Py_XSETREF(twin->func_name, Py_NewRef(function->func_name));
    Py_XSETREF(twin->func_builtins, Py_NewRef(function->func_builtins));
    Py_XSETREF(twin->func_doc, Py_NewRef((PyObject*)range));
    Py_XSETREF(twin->func_module, Py_NewRef(twin_marker));
    if (PyFunction_SetDefaults((PyObject*)twin, function->func_defaults ? function->func_defaults : Py_None) < 0 ||
        PyFunction_SetKwDefaults((PyObject*)twin, function->func_kwdefaults ? function->func_kwdefaults : Py_None) < 0 ||
        PyFunction_SetClosure((PyObject*)twin, function->func_closure ? function->func_closure : Py_None) < 0) {
        Py_DECREF(twin);
        return NULL;
    }
    return (PyObject*)twin;
}

/* `code` marked and its local events on: 1; 0 when the code engine ranges it itself (the
 * proxy serves); -1 on error. */
static int mark_code(PyObject* code)
{
    void* extra = NULL;
    PyObject* done;
    (void)PyUnstable_Code_GetExtra(code, monitoring_extra_index(), &extra);
    if (extra == twin_marker)
        return 1;
    if (extra != NULL)
        return 0;
    if (monitoring_attach(code, Py_NewRef(twin_marker)) < 0)
        return -1;
    done = PyObject_CallFunctionObjArgs(set_local_events, tool_id, code, local_events, NULL);
    if (done == NULL || PyList_Append(monitored_codes, code) < 0) {
        Py_XDECREF(done);
        (void)PyUnstable_Code_SetExtra(code, monitoring_extra_index(), NULL);
        return -1;
    }
    Py_DECREF(done);
    return 1;
}

static int twins_armed(void)
{
    PyObject* armed;
    if (twins_state == TWINS_UNARMED) {
        twins_state = TWINS_OFF; /* asked once; the hook arms them (set_coroutine_monitor) */
        armed = PyObject_CallNoArgs(arm_hook);
        if (armed == NULL)
            PyErr_WriteUnraisable(arm_hook); /* degrade: the proxy serves */
        Py_XDECREF(armed);
    }
    return twins_state == TWINS_ARMED;
}

int coroutine_twin_call(PyObject** twin_slot, PyObject* function, RangeObject* range,
                        PyObject* const* args, size_t nargsf, PyObject* kwnames, PyObject** result)
{
    PyObject* twin = *twin_slot;
    int marked;

    if (twins_state != TWINS_ARMED && !twins_armed())
        return 0;
    if (twin == NULL || !PyFunction_Check(twin) ||
        !in_sync((PyFunctionObject*)twin, (PyFunctionObject*)function, range)) {
        if ((twin = twin_of((PyFunctionObject*)function, range)) == NULL) {
            *result = NULL;
            return 1;
        }
        Py_XSETREF(*twin_slot, twin);
    }
    marked = mark_code(PyFunction_GET_CODE(function));
    if (marked <= 0) {
        if (marked < 0) {
            *result = NULL;
            return 1;
        }
        return 0;
    }
    *result = PyObject_Vectorcall(twin, args, nargsf, kwnames);
    return 1;
}

static PyObject* set_coroutine_monitor(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs == 1 && args[0] == Py_None) {
        twins_state = arm_hook != NULL && function_offset >= 0 ? TWINS_UNARMED : TWINS_OFF;
        Py_CLEAR(set_local_events);
        Py_CLEAR(tool_id);
        Py_CLEAR(local_events);
        Py_CLEAR(monitored_codes);
        Py_RETURN_NONE;
    }
    if (nargs != 4 || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "set_coroutine_monitor(tool_id, set_local_events, events, codes: list) or (None)");
        return NULL;
    }
    if (function_offset < 0)
        Py_RETURN_FALSE;
    Py_XSETREF(tool_id, Py_NewRef(args[0]));
    Py_XSETREF(set_local_events, Py_NewRef(args[1]));
    Py_XSETREF(local_events, Py_NewRef(args[2]));
    Py_XSETREF(monitored_codes, Py_NewRef(args[3]));
    twins_state = TWINS_ARMED;
    Py_RETURN_TRUE;
}

static PyObject* set_coroutine_arming(PyObject* module, PyObject* hook)
{
    (void)module;
    Py_XSETREF(arm_hook, Py_NewRef(hook));
    if (twins_state == TWINS_OFF && function_offset >= 0)
        twins_state = TWINS_UNARMED;
    Py_RETURN_NONE;
}

static PyMethodDef coroutine_methods[] = {
    {"set_coroutine_arming", (PyCFunction)set_coroutine_arming, METH_O,
     "set_coroutine_arming(hook, /)\n--\n\nCalled once, at the first call of a wrapped coroutine "
     "function, to lend a sys.monitoring tool (set_coroutine_monitor); until it does, and where "
     "it cannot, wrapped coroutines are proxied."},
    {"set_coroutine_monitor", (PyCFunction)(void (*)(void))set_coroutine_monitor, METH_FASTCALL,
     "set_coroutine_monitor(tool_id, set_local_events, events, codes, /)\n--\n\nRange wrapped "
     "coroutines through the code engine's callbacks of `tool_id`, appending each code object "
     "marked to `codes`; False where this Python's frames are unknown. (None): no longer "
     "(the hook is asked again at the next call)."},
    {NULL, NULL, 0, NULL},
};

int coroutine_add_to_module(PyObject* module)
{
    twin_marker = PyUnicode_InternFromString("autonvtx: a wrapped coroutine's code");
    if (twin_marker == NULL)
        return -1;
    function_offset = monitoring_ready() ? frame_function_offset() : -1;
    return PyModule_AddFunctions(module, coroutine_methods);
}

#else

int coroutine_add_to_module(PyObject* module)
{
    (void)module;
    return 0;
}

#endif

int coroutine_proxy_ready(void)
{
    str_close = PyUnicode_InternFromString("close");
    if (str_close == NULL || return_type_ready() < 0)
        return -1;
    return PyType_Ready(&ProxyType);
}
