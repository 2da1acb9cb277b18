/*
 * Regions inside functions (Python 3.12+, PEP 669): a range per loop iteration, a range over a
 * span of lines, a range per call, and the capture window they may carry.
 *
 * A code object named by regions holds them as a code extra (a tuple of Region, outermost
 * first; an index of this file's own). autonvtx.regions.monitor registers these callbacks
 * for a tool id of its own, with local LINE (and PY_START, PY_RESUME, PY_RETURN, PY_YIELD)
 * events on those code objects only, and the global PY_UNWIND:
 *
 *   line     a region's enter line opens it (a loop's closes the open iteration first); a
 *            line outside an open region of this frame closes it; any line no region needs
 *            returns DISABLE, so the interpreter stops calling for it. A loop's header line
 *            (its `lo`: CPython runs it before every iteration, `while True:` included) arms
 *            the open iteration: the enter line begins the next one only when armed, so an
 *            inner loop that starts on the enter line does not restart the outer iteration
 *            at each of its own steps
 *   start    a call region opens (each call is one iteration)
 *   exit     PY_RETURN, PY_UNWIND: the frame's open regions close
 *   yield    PY_YIELD: they close, and are remembered for the frame
 *   resume   PY_RESUME: what the frame's last yield closed opens again, with the same index
 *
 * Open regions sit on a per-thread stack of (region, frame, index): frames nest on a thread
 * and a suspended frame's regions are off the stack, so the top of the stack belongs to the
 * innermost running frame that opened one. Frames are told apart by their frame object
 * (identity only), so recursion and generators keep their own regions.
 */
#include "nvtxclient.h"

#if PY_VERSION_HEX >= 0x030C0000

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL_LINE (-1) /* enter "line" of a call region: PY_START opens it */

typedef struct RegionObject_ {
    PyObject_HEAD
    nvtxDomainHandle_t domain;
    nvtxEventAttributes_t attributes; /* registered message, unless the name holds {i} */
    PyObject* pieces;                 /* tuple of bytes between the {i}s; NULL: no {i} */
    int enter, lo, hi;
    int is_loop;
    long long count; /* iterations (or entries) this process began */
    long long capture_from, capture_to; /* [from, to); -1: no window */
    int capture_state;                  /* 0 not opened, 1 open, 2 closed */
    nvtxRangeId_t capture_id;
    nvtxDomainHandle_t capture_domain;
    nvtxEventAttributes_t capture_attributes;
    PyObject* on_capture; /* callable(opening: bool, index: int): cudaProfiler*, bookkeeping */
    PyObject* names;      /* (domain, message) as bytes: the handles are asked for again after a fork */
    int flight;           /* the range --flight watches under another tool: each iteration timed */
    struct RegionObject_* older; /* every live Region, newest first (regions_rebind) */
    struct RegionObject_* newer;
} RegionObject;

static PyTypeObject RegionType;
static Py_ssize_t regions_index = -1;
static Py_ssize_t pending_index = -1; /* a code extra: the placer of a code not placed yet */
static RegionObject* newest_region; /* every live Region, through `older` */

static void region_register(RegionObject* self);

typedef struct {
    RegionObject* region; /* borrowed: autonvtx.regions.monitor keeps every Region alive */
    PyObject* frame;      /* borrowed: compared, never dereferenced */
    long long index;
    int armed; /* a loop's header line ran since this iteration began: its enter line begins the next */
    unsigned long long started; /* a --flight iteration's start (budget_now), 0 when not timed */
} open_entry;

#define STACK_DEPTH 128
typedef struct {
    int depth;
    open_entry entries[STACK_DEPTH];
} open_stack;

static _Thread_local open_stack* stack_of_thread;
static pthread_key_t stack_key;
static PyObject* suspended; /* dict: id(frame) -> bytes holding its closed entries */
static PyObject* disable;   /* sys.monitoring.DISABLE */

static open_stack* thread_stack(void)
{
    open_stack* stack = stack_of_thread;
    if (stack == NULL) {
        stack = calloc(1, sizeof *stack);
        if (stack == NULL || pthread_setspecific(stack_key, stack) != 0) {
            free(stack);
            return NULL;
        }
        stack_of_thread = stack;
    }
    return stack;
}

/* The name of iteration `index` of a region whose name holds {i}, in `message`. */
static void region_message(RegionObject* r, long long index, char* message, Py_ssize_t size)
{
    Py_ssize_t n, i, used = 0;
    n = PyTuple_GET_SIZE(r->pieces);
    for (i = 0; i < n; i++) {
        PyObject* piece = PyTuple_GET_ITEM(r->pieces, i);
        Py_ssize_t len = PyBytes_GET_SIZE(piece);
        if (used + len >= size)
            len = size - 1 - used;
        memcpy(message + used, PyBytes_AS_STRING(piece), (size_t)len);
        used += len;
        if (i + 1 < n && used < size - 1)
            used += snprintf(message + used, (size_t)(size - used), "%lld", index);
        if (used >= size - 1) {
            used = size - 1;
            break;
        }
    }
    message[used] = '\0';
}

static void push_range(RegionObject* r, long long index)
{
    nvtxEventAttributes_t attributes;
    char message[256];

    if (r->domain == NULL)
        return;
    attributes = r->attributes;
    attributes.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    attributes.payload.llValue = index;
    if (r->pieces != NULL) {
        region_message(r, index, message, (Py_ssize_t)sizeof message);
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = message;
    }
    nvtxDomainRangePushEx(r->domain, &attributes);
}

static void pop_range(RegionObject* r)
{
    if (r->domain != NULL)
        nvtxDomainRangePop(r->domain);
}

static void call_capture(RegionObject* r, int opening, long long index)
{
    PyObject* result;
    if (r->on_capture == NULL || r->on_capture == Py_None)
        return;
    result = PyObject_CallFunction(r->on_capture, "OL", opening ? Py_True : Py_False, index);
    if (result == NULL)
        PyErr_WriteUnraisable(r->on_capture); /* a window's bookkeeping never breaks the loop */
    Py_XDECREF(result);
}

/* At the start of iteration `index`: close the window at its end, open it at its start.
 * Order: cudaProfilerStart, then the capture range; the range ends before cudaProfilerStop. */
static void pass_window(RegionObject* r, long long index)
{
    if (r->capture_state == 1 && index == r->capture_to) {
        if (r->capture_domain != NULL)
            nvtxDomainRangeEnd(r->capture_domain, r->capture_id);
        r->capture_state = 2;
        call_capture(r, 0, index);
    }
    if (r->capture_state == 0 && index == r->capture_from) {
        r->capture_state = 1;
        call_capture(r, 1, index);
        if (r->capture_domain != NULL)
            r->capture_id = nvtxDomainRangeStartEx(r->capture_domain, &r->capture_attributes);
    }
}

static void open_region(open_stack* stack, RegionObject* r, PyObject* frame, long long index)
{
    open_entry* top;
    if (stack->depth >= STACK_DEPTH)
        return; /* deeper than any real program nests regions (recursion): no range */
    push_range(r, index);
    top = &stack->entries[stack->depth];
    top->region = r;
    top->frame = frame;
    top->index = index;
    top->armed = 0;
    top->started = 0;
    stack->depth++;
}

static void begin(open_stack* stack, RegionObject* r, PyObject* frame)
{
    long long index = r->count++;
    if (r->capture_from >= 0)
        pass_window(r, index);
    open_region(stack, r, frame, index);
    if (r->flight && stack->depth > 0 && stack->entries[stack->depth - 1].region == r)
        stack->entries[stack->depth - 1].started = budget_now();
}

/* Close the top entry (the stack is known to be non-empty). */
static void close_top(open_stack* stack)
{
    open_entry* top = &stack->entries[--stack->depth];
    unsigned long long end = top->started != 0 ? budget_now() : 0;
    pop_range(top->region);
    if (end != 0) { /* --flight's region: one instance (a suspended one restarts untimed) */
        char message[256];
        if (top->region->pieces != NULL)
            region_message(top->region, top->index, message, (Py_ssize_t)sizeof message);
        else
            snprintf(message, sizeof message, "%s", PyBytes_AS_STRING(PyTuple_GET_ITEM(top->region->names, 1)));
        flight_instance(message, end - top->started);
    }
}

static inline int top_is_frame(open_stack* stack, PyObject* frame)
{
    return stack->depth > 0 && stack->entries[stack->depth - 1].frame == frame;
}

/* Depth just below the open entry (r, frame), or -1 when it is not open in this frame. */
static int find_open(open_stack* stack, RegionObject* r, PyObject* frame)
{
    int d;
    for (d = stack->depth; d > 0; d--) {
        open_entry* e = &stack->entries[d - 1];
        if (e->frame != frame)
            return -1;
        if (e->region == r)
            return d - 1;
    }
    return -1;
}

static inline PyObject* regions_of(PyObject* code)
{
    void* extra = NULL;
    if (!PyCode_Check(code))
        return NULL;
    (void)PyUnstable_Code_GetExtra(code, regions_index, &extra);
    return (PyObject*)extra;
}

static PyObject* on_line(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    PyObject* regions;
    PyObject* frame;
    open_stack* stack;
    long line;
    Py_ssize_t i, n;
    int needed = 0;
    (void)self;

    if (nargs != 2 || (regions = regions_of(args[0])) == NULL)
        Py_RETURN_NONE;
    line = PyLong_AsLong(args[1]);
    if (line == -1 && PyErr_Occurred())
        return NULL;
    stack = thread_stack();
    frame = (PyObject*)PyEval_GetFrame();
    if (stack == NULL || frame == NULL)
        Py_RETURN_NONE;
    /* Leaving: this frame's innermost open regions that do not hold this line. */
    while (top_is_frame(stack, frame)) {
        RegionObject* r = stack->entries[stack->depth - 1].region;
        if (r->lo <= line && line <= r->hi)
            break;
        close_top(stack);
    }
    n = PyTuple_GET_SIZE(regions);
    for (i = 0; i < n; i++) {
        RegionObject* r = (RegionObject*)PyTuple_GET_ITEM(regions, i);
        if (r->is_loop && line == r->lo) {
            int at = find_open(stack, r, frame);
            needed = 1;
            if (at >= 0)
                stack->entries[at].armed = 1;
        } else if (line == r->enter) {
            int at = find_open(stack, r, frame);
            needed = 1;
            if (at >= 0 && (!r->is_loop || !stack->entries[at].armed))
                continue; /* a span open already, or an inner loop stepping on the enter line */
            while (at >= 0 && stack->depth > at)
                close_top(stack); /* the iteration before, and what it left open inside */
            begin(stack, r, frame);
        } else if (line < r->lo || line > r->hi) {
            needed = 1; /* where control lands when it leaves the region */
        }
    }
    if (needed)
        Py_RETURN_NONE;
    return Py_NewRef(disable);
}

/* The placer of a code object a region selected and not yet placed (a code extra of its own
   index; NULL when none). */
static inline PyObject* pending_of(PyObject* code)
{
    void* extra = NULL;
    if (pending_index < 0 || !PyCode_Check(code))
        return NULL;
    (void)PyUnstable_Code_GetExtra(code, pending_index, &extra);
    return (PyObject*)extra;
}

/* A pending code object's first call (PY_START), or the first resumption of a generator or
   coroutine begun before it was pending (PY_RESUME): its placer (Python: the source's loops,
   then attach_regions and the code's local events) runs now. sys.monitoring calls no
   callback for what the placer itself runs. */
static PyObject* place_now(PyObject* code)
{
    PyObject* placer = pending_of(code);
    PyObject* done;
    if (placer == NULL)
        return NULL;
    /* Left pending while it runs: another thread's first call meanwhile calls it too, and
       waits there (the placer's lock) until the regions are on, so no call runs half placed. */
    Py_INCREF(placer);
    done = PyObject_CallOneArg(placer, code);
    if (done == NULL)
        PyErr_WriteUnraisable(code); /* the program's call goes on, whatever the placer did */
    Py_XDECREF(done);
    if (pending_of(code) == placer && PyUnstable_Code_SetExtra(code, pending_index, NULL) < 0)
        PyErr_WriteUnraisable(code);
    Py_DECREF(placer);
    return regions_of(code);
}

static PyObject* on_frame_start(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    PyObject* regions;
    PyObject* frame;
    open_stack* stack;
    Py_ssize_t i, n;
    (void)self;

    if (nargs < 1 || ((regions = regions_of(args[0])) == NULL && (regions = place_now(args[0])) == NULL))
        Py_RETURN_NONE;
    stack = thread_stack();
    frame = (PyObject*)PyEval_GetFrame();
    if (stack == NULL || frame == NULL)
        Py_RETURN_NONE;
    n = PyTuple_GET_SIZE(regions);
    for (i = 0; i < n; i++) {
        RegionObject* r = (RegionObject*)PyTuple_GET_ITEM(regions, i);
        if (r->enter == CALL_LINE)
            begin(stack, r, frame);
    }
    Py_RETURN_NONE;
}

static PyObject* frame_key(PyObject* frame)
{
    return PyLong_FromVoidPtr(frame);
}

/* Close this frame's open regions; with `keep`, remember them for its next resumption. */
static PyObject* close_frame(PyObject* const* args, Py_ssize_t nargs, int keep)
{
    PyObject* frame;
    PyObject* key;
    open_stack* stack;
    int bottom;

    if (nargs < 1 || regions_of(args[0]) == NULL)
        Py_RETURN_NONE;
    stack = stack_of_thread;
    frame = (PyObject*)PyEval_GetFrame();
    if (frame == NULL)
        Py_RETURN_NONE;
    bottom = stack != NULL ? stack->depth : 0;
    while (stack != NULL && top_is_frame(stack, frame))
        close_top(stack);
    key = frame_key(frame);
    if (key == NULL)
        return NULL;
    if (keep && stack != NULL && bottom > stack->depth) {
        PyObject* saved = PyBytes_FromStringAndSize(
            (const char*)&stack->entries[stack->depth],
            (Py_ssize_t)(bottom - stack->depth) * (Py_ssize_t)sizeof(open_entry));
        if (saved == NULL || PyDict_SetItem(suspended, key, saved) < 0) {
            Py_XDECREF(saved);
            Py_DECREF(key);
            return NULL;
        }
        Py_DECREF(saved);
    } else if (PyDict_GET_SIZE(suspended) > 0 && PyDict_DelItem(suspended, key) < 0) {
        PyErr_Clear(); /* nothing was remembered for this frame */
    }
    Py_DECREF(key);
    Py_RETURN_NONE;
}

static PyObject* on_frame_exit(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    (void)self;
    return close_frame(args, nargs, 0);
}

static PyObject* on_frame_yield(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    (void)self;
    return close_frame(args, nargs, 1);
}

static PyObject* on_frame_resume(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    PyObject* frame;
    PyObject* key;
    PyObject* saved;
    open_stack* stack;
    Py_ssize_t i, n;
    (void)self;

    if (nargs < 1 || (regions_of(args[0]) == NULL && place_now(args[0]) == NULL) || PyDict_GET_SIZE(suspended) == 0)
        Py_RETURN_NONE;
    stack = thread_stack();
    frame = (PyObject*)PyEval_GetFrame();
    if (stack == NULL || frame == NULL || (key = frame_key(frame)) == NULL)
        Py_RETURN_NONE;
    saved = PyDict_GetItemWithError(suspended, key);
    if (saved != NULL) {
        const open_entry* entries = (const open_entry*)PyBytes_AS_STRING(saved);
        n = PyBytes_GET_SIZE(saved) / (Py_ssize_t)sizeof(open_entry);
        for (i = 0; i < n; i++) {
            int depth = stack->depth;
            open_region(stack, entries[i].region, frame, entries[i].index);
            if (stack->depth > depth) /* armed before the suspension: an `async for` header awaits */
                stack->entries[depth].armed = entries[i].armed;
        }
        (void)PyDict_DelItem(suspended, key);
    }
    Py_DECREF(key);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* Region(domain, message, color, category, enter, lo, hi, is_loop, pieces, capture_from,
 *        capture_to, on_capture) */
static int Region_init(RegionObject* self, PyObject* args, PyObject* kwds)
{
    const char* domain;
    const char* message;
    unsigned long color = 0, category = 0;
    PyObject* pieces;
    PyObject* on_capture;
    (void)kwds;

    if (!PyArg_ParseTuple(args, "sskkiiipOLLO:Region", &domain, &message, &color, &category,
                          &self->enter, &self->lo, &self->hi, &self->is_loop, &pieces,
                          &self->capture_from, &self->capture_to, &on_capture))
        return -1;
    if (pieces != Py_None) {
        Py_ssize_t i;
        if (!PyTuple_Check(pieces) || PyTuple_GET_SIZE(pieces) < 2) {
            PyErr_SetString(PyExc_TypeError, "Region: pieces must be None or a tuple of 2+ bytes");
            return -1;
        }
        for (i = 0; i < PyTuple_GET_SIZE(pieces); i++) {
            if (!PyBytes_Check(PyTuple_GET_ITEM(pieces, i))) {
                PyErr_SetString(PyExc_TypeError, "Region: pieces must be bytes");
                return -1;
            }
        }
        Py_XSETREF(self->pieces, Py_NewRef(pieces));
    }
    Py_XSETREF(self->on_capture, Py_NewRef(on_capture));
    Py_XSETREF(self->names, Py_BuildValue("(yy)", domain, message));
    if (self->names == NULL)
        return -1;
    memset(&self->attributes, 0, sizeof self->attributes);
    self->attributes.version = NVTX_VERSION;
    self->attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    self->attributes.colorType = NVTX_COLOR_ARGB;
    self->attributes.color = (uint32_t)color;
    self->attributes.category = (uint32_t)category;
    memset(&self->capture_attributes, 0, sizeof self->capture_attributes);
    self->capture_attributes.version = NVTX_VERSION;
    self->capture_attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    region_register(self);
    self->flight = flight_matches(domain, message);
    if (self->older == NULL && self->newer == NULL && newest_region != self) {
        self->older = newest_region;
        if (newest_region != NULL)
            newest_region->newer = self;
        newest_region = self;
    }
    return 0;
}

/* The domain handle and registered strings, asked of the tool (again, in a fork child: nsys
 * starts afresh there and drops events made with the parent's handles). */
static void region_register(RegionObject* self)
{
    const char* domain = PyBytes_AS_STRING(PyTuple_GET_ITEM(self->names, 0));
    const char* message = PyBytes_AS_STRING(PyTuple_GET_ITEM(self->names, 1));

    self->domain = nvtxDomainCreateA(domain);
    self->attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    self->attributes.message.ascii = NULL;
    if (self->domain != NULL && self->pieces == NULL) {
        self->attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        self->attributes.message.registered = nvtxDomainRegisterStringA(self->domain, message);
    }
    if (self->capture_from >= 0) {
        /* A registered string: nsys --capture-range=nvtx matches registered strings unless
         * NSYS_NVTX_PROFILER_REGISTER_ONLY=0. */
        self->capture_domain = nvtxDomainCreateA("autonvtx");
        if (self->capture_domain != NULL) {
            self->capture_attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
            self->capture_attributes.message.registered =
                nvtxDomainRegisterStringA(self->capture_domain, "capture");
        }
    }
}

long regions_rebind(void)
{
    RegionObject* r;
    long bound = 0;
    for (r = newest_region; r != NULL; r = r->older) {
        region_register(r);
        bound += r->domain != NULL;
    }
    return bound;
}

static void Region_dealloc(RegionObject* self)
{
    if (self->newer != NULL)
        self->newer->older = self->older;
    else if (newest_region == self)
        newest_region = self->older;
    if (self->older != NULL)
        self->older->newer = self->newer;
    Py_XDECREF(self->names);
    Py_XDECREF(self->pieces);
    Py_XDECREF(self->on_capture);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

/* The window, closed at exit when the loop ended inside it: what iteration `to` would do. */
static PyObject* Region_close_window(RegionObject* self, PyObject* unused)
{
    (void)unused;
    if (self->capture_state == 1) {
        if (self->capture_domain != NULL)
            nvtxDomainRangeEnd(self->capture_domain, self->capture_id);
        self->capture_state = 2;
        call_capture(self, 0, self->count);
    }
    Py_RETURN_NONE;
}

static PyMemberDef Region_members[] = {
    {"count", Py_T_LONGLONG, offsetof(RegionObject, count), Py_READONLY,
     "Iterations (or entries) begun in this process."},
    {"capture_state", Py_T_INT, offsetof(RegionObject, capture_state), Py_READONLY,
     "0: the window has not opened; 1: open; 2: closed."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef Region_methods[] = {
    {"close_window", (PyCFunction)Region_close_window, METH_NOARGS,
     "Close the capture window if it is open (at exit)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.Region",
    .tp_basicsize = sizeof(RegionObject),
    .tp_dealloc = (destructor)Region_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("A region of a code object: its range, lines and capture window."),
    .tp_init = (initproc)Region_init,
    .tp_new = PyType_GenericNew,
    .tp_members = Region_members,
    .tp_methods = Region_methods,
};

static void release_regions(void* extra)
{
    Py_XDECREF((PyObject*)extra);
}

static PyObject* attach_regions(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    Py_ssize_t i;
    (void)module;
    if (nargs != 2 || !PyCode_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "attach_regions(code, tuple_of_regions)");
        return NULL;
    }
    for (i = 0; i < PyTuple_GET_SIZE(args[1]); i++) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(args[1], i), &RegionType)) {
            PyErr_SetString(PyExc_TypeError, "attach_regions: expected Region objects");
            return NULL;
        }
    }
    Py_INCREF(args[1]);
    if (PyUnstable_Code_SetExtra(args[0], regions_index, args[1]) < 0) {
        Py_DECREF(args[1]);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject* detach_regions(PyObject* module, PyObject* code)
{
    (void)module;
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "detach_regions(code)");
        return NULL;
    }
    if (PyUnstable_Code_SetExtra(code, regions_index, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject* defer_regions(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyCode_Check(args[0]) || (args[1] != Py_None && !PyCallable_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "defer_regions(code, placer_or_None)");
        return NULL;
    }
    if (pending_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "defer_regions: no code extra index left");
        return NULL;
    }
    if (args[1] != Py_None)
        Py_INCREF(args[1]);
    if (PyUnstable_Code_SetExtra(args[0], pending_index, args[1] == Py_None ? NULL : args[1]) < 0) {
        if (args[1] != Py_None)
            Py_DECREF(args[1]);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef regions_methods[] = {
    {"defer_regions", (PyCFunction)(void (*)(void))defer_regions, METH_FASTCALL,
     "defer_regions(code, placer, /)\n--\n\nAt `code`'s next PY_START or PY_RESUME (local events the caller "
     "sets), call placer(code) once; None: nothing pending."},
    {"attach_regions", (PyCFunction)(void (*)(void))attach_regions, METH_FASTCALL,
     "attach_regions(code, regions, /)\n--\n\nGive `code` these Regions (outermost first)."},
    {"detach_regions", (PyCFunction)detach_regions, METH_O,
     "detach_regions(code, /)\n--\n\nTake the Regions off `code`."},
    {"region_line", (PyCFunction)(void (*)(void))on_line, METH_FASTCALL,
     "sys.monitoring LINE callback for regions."},
    {"region_start", (PyCFunction)(void (*)(void))on_frame_start, METH_FASTCALL,
     "sys.monitoring PY_START callback for regions."},
    {"region_exit", (PyCFunction)(void (*)(void))on_frame_exit, METH_FASTCALL,
     "sys.monitoring PY_RETURN / PY_UNWIND callback for regions."},
    {"region_yield", (PyCFunction)(void (*)(void))on_frame_yield, METH_FASTCALL,
     "sys.monitoring PY_YIELD callback for regions."},
    {"region_resume", (PyCFunction)(void (*)(void))on_frame_resume, METH_FASTCALL,
     "sys.monitoring PY_RESUME callback for regions."},
    {NULL, NULL, 0, NULL},
};

static void free_stack(void* stack)
{
    free(stack);
}

int regions_add_to_module(PyObject* module)
{
    if (regions_index < 0) {
        if (pthread_key_create(&stack_key, free_stack) != 0) {
            PyErr_SetString(PyExc_OSError, "autonvtx: pthread_key_create failed");
            return -1;
        }
        regions_index = PyUnstable_Eval_RequestCodeExtraIndex(release_regions);
        if (regions_index < 0) {
            PyErr_Clear(); /* no index left: regions report themselves unavailable */
            return 0;
        }
        pending_index = PyUnstable_Eval_RequestCodeExtraIndex(release_regions);
        if (pending_index < 0)
            PyErr_Clear(); /* regions are then placed as their modules run (defer_regions raises) */
        suspended = PyDict_New();
        if (suspended == NULL)
            return -1;
        {
            PyObject* monitoring = PySys_GetObject("monitoring"); /* borrowed */
            disable = monitoring != NULL ? PyObject_GetAttrString(monitoring, "DISABLE") : NULL;
            if (disable == NULL)
                return -1;
        }
    }
    if (PyType_Ready(&RegionType) < 0 || PyModule_AddObjectRef(module, "Region", (PyObject*)&RegionType) < 0)
        return -1;
    return PyModule_AddFunctions(module, regions_methods);
}

#else

int regions_add_to_module(PyObject* module)
{
    (void)module;
    return 0;
}

long regions_rebind(void)
{
    return 0;
}

#endif
