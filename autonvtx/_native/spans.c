/*
 * A coroutine call's one range (`coroutine = "call"`, the default) under the code engine
 * (Python 3.12+): monitoring.c's callbacks open it at the coroutine's PY_START and close it at
 * its PY_RETURN or PY_UNWIND; this keeps it, by coroutine, in between.
 */
#include "nvtxclient.h"

#if PY_VERSION_HEX >= 0x030C0000

#include <stddef.h>

void monitoring_range_opened(void);
void monitoring_range_closed(void);

/*
 * A coroutine's frame runs in pieces, between awaits, and may end on another thread than it
 * started or never run again: its range is an NVTX start/end range (range_start), kept here by
 * coroutine object from its PY_START (its first resumption: a coroutine never awaited has no
 * range) to its PY_RETURN or PY_UNWIND (an exception, a cancellation, a close() that raised
 * GeneratorExit in it). A coroutine closed without running (3.12's close() of one suspended
 * outside any `try` completes it with no event) or dropped while suspended ends it when it is
 * freed, through a weak reference whose callback is the span itself. Each open span counts as
 * an open range for PY_UNWIND's arming. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    RangeObject* range;
    nvtxRangeId_t id;
    unsigned long long begun, cost; /* while --budget measures its range: its start, timed */
    PyObject* key;     /* the coroutine's address, its key in `spans` */
    PyObject* weakref; /* to the coroutine, this span its callback; NULL once ended */
} SpanObject;

static PyTypeObject SpanType;
static PyObject* spans; /* coroutine address -> its open SpanObject */

int coroutine_spans_open(void)
{
    return spans != NULL && PyDict_GET_SIZE(spans) > 0;
}

int coroutine_spans_ready(void)
{
    if (spans == NULL && (PyType_Ready(&SpanType) < 0 || (spans = PyDict_New()) == NULL))
        return -1;
    return 0;
}

static void span_end(SpanObject* span)
{
    PyObject* weakref = span->weakref;
    if (weakref == NULL)
        return;
    span->weakref = NULL;
    if (span->begun != 0) {
        unsigned long long end = budget_now();
        range_end(span->range, span->id);
        budget_account(span->range, end - span->begun, span->cost + (budget_now() - end));
    }
    else
        range_end(span->range, span->id);
    monitoring_range_closed();
    Py_INCREF(span); /* the dictionary's reference may be the last */
    if (PyDict_DelItem(spans, span->key) < 0)
        PyErr_Clear();
    Py_DECREF(weakref); /* the cycle weakref -> callback -> span is broken here */
    Py_DECREF(span);
}

/* The weak reference's callback: the coroutine is being freed with its range open. */
static PyObject* span_collected(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    span_end((SpanObject*)callable);
    Py_RETURN_NONE;
}

static void Span_dealloc(SpanObject* self)
{
    Py_XDECREF(self->range);
    Py_XDECREF(self->key);
    Py_XDECREF(self->weakref);
    PyObject_Free(self);
}

static PyTypeObject SpanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.CoroutineSpan",
    .tp_basicsize = sizeof(SpanObject),
    .tp_dealloc = (destructor)Span_dealloc,
    .tp_vectorcall_offset = offsetof(SpanObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = PyDoc_STR("A coroutine call's open NVTX start/end range; called, it ends it."),
};


int running_generator(PyObject** generator); /* globalevents.c: 0 where not known */

/* The coroutine whose frame is running (a new reference), else NULL (nothing raised). */
static PyObject* running_coroutine(void)
{
    PyObject* generator;
    PyFrameObject* frame;
    if (running_generator(&generator))
        return Py_XNewRef(generator);
    frame = PyEval_GetFrame(); /* borrowed: the callback runs in the frame's */
    return frame != NULL ? PyFrame_GetGenerator(frame) : NULL;
}

void coroutine_span_open(RangeObject* range)
{
    PyObject* coroutine;
    SpanObject* span;
    PyObject* found;
    if (range->off) /* --budget turned its function off */
        return;
    coroutine = running_coroutine();
    if (coroutine == NULL)
        return;
    span = PyObject_New(SpanObject, &SpanType);
    if (span == NULL)
        goto failed;
    span->vectorcall = span_collected;
    span->range = (RangeObject*)Py_NewRef((PyObject*)range);
    span->weakref = NULL;
    span->key = PyLong_FromVoidPtr(coroutine);
    if (span->key == NULL)
        goto failed;
    found = PyDict_GetItemWithError(spans, span->key); /* borrowed */
    if (found != NULL)
        span_end((SpanObject*)found); /* cannot start twice; ended as a precaution */
    span->weakref = PyWeakref_NewRef(coroutine, (PyObject*)span);
    if (span->weakref == NULL || PyDict_SetItem(spans, span->key, (PyObject*)span) < 0) {
        Py_CLEAR(span->weakref);
        goto failed;
    }
    span->begun = 0;
    if (range->measure_left > 0) {
        unsigned long long before = budget_now();
        span->id = range_start(range);
        span->begun = budget_now();
        span->cost = span->begun - before;
    }
    else
        span->id = range_start(range);
    monitoring_range_opened();
    Py_DECREF(span); /* held by the dictionary (and by its weak reference's callback) */
    Py_DECREF(coroutine);
    return;
failed:
    PyErr_Clear(); /* no memory: this call has no range */
    Py_XDECREF(span);
    Py_DECREF(coroutine);
}

void coroutine_span_close(void)
{
    PyObject* coroutine = running_coroutine();
    PyObject* key;
    PyObject* found;
    if (coroutine == NULL)
        return;
    key = PyLong_FromVoidPtr(coroutine);
    found = key != NULL ? PyDict_GetItemWithError(spans, key) : NULL;
    if (found != NULL)
        span_end((SpanObject*)found);
    PyErr_Clear();
    Py_XDECREF(key);
    Py_DECREF(coroutine);
}

#endif
