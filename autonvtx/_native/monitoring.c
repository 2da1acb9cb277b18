/*
 * The code engine's native half (Python 3.12+, PEP 669): sys.monitoring callbacks that push
 * and pop the Range attached to a code object, and the attachment itself.
 *
 * A Range hangs on its code object as a code extra (PyUnstable_Code_SetExtra, an index this
 * module requests once): the callbacks find it in O(1) from the code object sys.monitoring
 * passes them, and a code object without one (PY_UNWIND and PY_THROW are global events, so
 * every code object's exceptions reach the callback) costs one pointer test. The extra holds a
 * strong reference, released by detach() or when the code object dies (the free function).
 *
 * A package targeted wholesale has thousands of functions, most never called in a given run:
 * the walk (uniform.c, and its code engine's side below) gives each of their code objects a
 * shared PendingRange (the module's style: domain handle, color, category; one per style for
 * the process), and the first run of the code makes its own Range, named by the code's
 * co_qualname, in its place. A function never called costs no Range and no registered string,
 * and no code extra either: its style is kept in room the monitoring data the walk allocates
 * for it leaves unread (3.12: the block's spare end; 3.13: the bytes between its event tables
 * and `tools`; globalevents.c, monitoring_pending_in_data). Nor a list entry of its own: the
 * code takes its name's place in the report, and uninstall reads that list (report_monitored).
 *
 * ranges.CodeMonitor registers monitoring_push for PY_START, PY_RESUME and PY_THROW (a throw
 * resumes a suspended generator), monitoring_pop for PY_RETURN and PY_YIELD, and
 * monitoring_unwind for PY_UNWIND: a range per run of the frame between suspensions, as the
 * wrapper engine gives.
 *
 * PY_UNWIND has no local form: while it is on, every frame an exception leaves, anywhere,
 * costs CPython's dispatch of the event (about 20 ns). Only a frame that pushed a range needs
 * it, so where ranges.py could check the interpreter's table of global events
 * (globalevents.c), the code engine's PY_UNWIND bit is on only while one of its ranges is open
 * on some thread: set by the push that opens the first, cleared by the pop that closes the
 * last (a byte each time; set_events would re-instrument every running frame).
 */
#include "uniform.h"

#if PY_VERSION_HEX >= 0x030C0000

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static Py_ssize_t extra_index = -1;

static void release_range(void* extra)
{
    Py_XDECREF((PyObject*)extra);
}

/* The styles walks give code objects until they first run (PendingStyles, range.c: a code's
 * message is its co_qualname), one per (domain, color, category) for the process: the hundreds
 * of modules of a package targeted wholesale share a few (the auto colors are a small palette),
 * and a code object's monitoring data may name one without holding it (globalevents.c). */
static PendingStyleObject** styles;
static Py_ssize_t styles_count, styles_room;

PyObject* monitoring_pending(nvtxDomainHandle_t domain, PyObject* domain_name, unsigned long color,
                             unsigned long category)
{
    Py_ssize_t i;
    PyObject* made;
    for (i = 0; i < styles_count; ++i) {
        PendingStyleObject* style = styles[i];
        int same;
        if (style->domain != domain || style->color != color || style->category != category)
            continue;
        same = style->domain_name == domain_name || PyUnicode_Compare(style->domain_name, domain_name) == 0;
        if (same)
            return Py_NewRef((PyObject*)style);
        if (PyErr_Occurred())
            return NULL;
    }
    if (styles_count == styles_room) {
        Py_ssize_t room = styles_room ? 2 * styles_room : 8;
        PendingStyleObject** grown = PyMem_Realloc(styles, (size_t)room * sizeof *styles);
        if (grown == NULL)
            return PyErr_NoMemory();
        styles = grown;
        styles_room = room;
    }
    made = pending_style_new(domain, domain_name, color, category);
    if (made == NULL)
        return NULL;
    styles[styles_count++] = (PendingStyleObject*)Py_NewRef(made); /* held for the process */
    return made;
}

/* A style's number in the table (1-based; 0: not one), and the style of a number (else NULL):
 * what a code's monitoring data keeps (globalevents.c). */
Py_ssize_t monitoring_style_number(PyObject* candidate)
{
    static Py_ssize_t last; /* a module's walk asks for its one style each time */
    Py_ssize_t i;
    if (last >= 1 && last <= styles_count && (PyObject*)styles[last - 1] == candidate)
        return last;
    for (i = 0; i < styles_count; ++i)
        if ((PyObject*)styles[i] == candidate)
            return last = i + 1;
    return 0;
}

PyObject* monitoring_style_at(Py_ssize_t number)
{
    return number >= 1 && number <= styles_count ? (PyObject*)styles[number - 1] : NULL;
}

/* A code's monitoring data, as CPython keeps it (globalevents.c): the pending style the walk
 * left in it (borrowed), else NULL; whether the walk turns events on lazily; the probe of
 * 3.13's spare bytes. */
PyObject* monitoring_pending_in_data(PyCodeObject* code);
void monitoring_lazy(int on);
int monitoring_gap_probe(PyCodeObject* code, int stage);

/* The code's own Range in place of its PendingRange; NULL (nothing raised) without memory. */
static RangeObject* settle(PyObject* code, PendingStyleObject* pending)
{
    RangeObject* range = range_new_in_domain(pending->domain, pending->domain_name,
                                             ((PyCodeObject*)code)->co_qualname, pending->color,
                                             pending->category);
    /* A PendingRange held as the code extra goes to release_range (the code held one
     * reference to it); one in the monitoring data is borrowed and stays there, unread. */
    if (range == NULL || PyUnstable_Code_SetExtra(code, extra_index, range) < 0) {
        Py_XDECREF(range);
        PyErr_Clear(); /* no range for this run; the next one tries again */
        return NULL;
    }
    return range;
}

/* The code engine's PY_UNWIND bit in the interpreter's table of global events, once armed
 * (arm_unwind): NULL while PY_UNWIND stays on for good. `open_ranges` counts the ranges the
 * callbacks pushed and have not popped, on every thread (the GIL orders the callbacks). */
Py_ssize_t global_events_offset(void); /* globalevents.c: -1 where unknown */
#define EVENT_PY_UNWIND 12 /* the table's index for each (3.12, 3.13; globalevents.c checks) */
#define EVENT_PY_THROW 13
static uint8_t* unwind_tools;
static uint8_t unwind_bit;
static Py_ssize_t open_ranges;

static inline void range_opened(void)
{
    if (unwind_tools != NULL && open_ranges++ == 0)
        *unwind_tools |= unwind_bit;
}

static inline void range_closed(void)
{
    if (unwind_tools != NULL && open_ranges > 0 && --open_ranges == 0)
        *unwind_tools &= (uint8_t)~unwind_bit;
}

static uint8_t* global_events(void)
{
    Py_ssize_t offset = global_events_offset();
    if (offset < 0)
        return NULL;
    return (uint8_t*)PyInterpreterState_Get() + offset;
}

static inline void* extra_of(PyObject* const* args, Py_ssize_t nargs)
{
    void* extra = NULL;
    if (nargs < 1 || !PyCode_Check(args[0]))
        return NULL;
    /* Cannot fail for a code object: a missing slot reads as NULL. */
    (void)PyUnstable_Code_GetExtra(args[0], extra_index, &extra);
    return extra;
}

/* The code objects whose ranges this thread has open, innermost last. A frame that was
 * already running when its code got monitored ends with PY_RETURN or PY_UNWIND without having
 * pushed: its pop must not close the range of a frame below it (or count as a pop with no
 * push), so a pop happens only for the code on top. Deeper than SHADOW_DEPTH, pops are
 * trusted (only the depth is counted). Frames nest on a thread, and a generator's range closes
 * at each suspension, so the top is always the innermost running frame that pushed. */
#define SHADOW_DEPTH 256
typedef struct {
    Py_ssize_t depth;
    PyObject* codes[SHADOW_DEPTH]; /* borrowed: compared, never dereferenced */
    /* --budget: when a measured range's push ended, and what the push cost; 0 otherwise. */
    unsigned long long starts[SHADOW_DEPTH];
    unsigned long long costs[SHADOW_DEPTH];
} shadow_stack;

/* A frame of a code whose range --budget turned off while others of its frames had theirs
 * open: its entry says so, and its return pops the entry, not their ranges (code objects are
 * aligned: the low bit is free). */
#define NOT_PUSHED(code) ((PyObject*)((uintptr_t)(code) | 1u))

/* Only a pointer is thread-local: eight bytes fit in the static TLS a dlopen'ed module may
 * use (TLS descriptors then cost a load), where the stack itself would not. The stack is made
 * on a thread's first push and freed when the thread exits (shadow_key's destructor). */
static _Thread_local shadow_stack* shadow;
static pthread_key_t shadow_key;

static shadow_stack* thread_shadow(void)
{
    shadow_stack* stack = shadow;
    if (stack == NULL) {
        stack = calloc(1, sizeof *stack);
        if (stack == NULL || pthread_setspecific(shadow_key, stack) != 0) {
            free(stack);
            return NULL; /* no memory: this thread's pops are trusted */
        }
        shadow = stack;
    }
    return stack;
}

/* The open ranges' count, for PY_UNWIND's arming, from spans.c (a coroutine call's range). */
void monitoring_range_opened(void)
{
    range_opened();
}

void monitoring_range_closed(void)
{
    range_closed();
}

/* The Range for the code of a starting or resuming frame: its own, or the one its pending
 * style makes now; NULL where it has none. */
static RangeObject* range_to_push(PyObject* const* args, Py_ssize_t nargs)
{
    RangeObject* range = extra_of(args, nargs);
    if (range == NULL) {
        /* Its style in its monitoring data, or not ours (PY_THROW is global). */
        PendingStyleObject* style = nargs >= 1 && PyCode_Check(args[0])
                                        ? (PendingStyleObject*)monitoring_pending_in_data((PyCodeObject*)args[0])
                                        : NULL;
        if (style != NULL)
            range = settle(args[0], style);
    }
    else if (!Py_IS_TYPE(range, &RangeType))
        range = settle(args[0], (PendingStyleObject*)range);
    return range;
}

/* sys.monitoring.DISABLE (a new reference), or None where it cannot be read. */
static PyObject* disable_value;

static PyObject* disabled(void)
{
    if (disable_value == NULL) {
        PyObject* monitoring = PySys_GetObject("monitoring"); /* borrowed */
        disable_value = monitoring != NULL ? PyObject_GetAttrString(monitoring, "DISABLE") : NULL;
        if (disable_value == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    return Py_NewRef(disable_value);
}

/* The frame's range pushed (timed while --budget measures it). Turned off by the budget: no
 * range; the event is disabled at this place of the code once none of its ranges is open
 * (`can_disable`: not for PY_THROW), else the frame is marked as one that pushed nothing. */
static PyObject* push_range(RangeObject* range, PyObject* code, int can_disable)
{
    shadow_stack* stack;
    Py_ssize_t at;
    if (range->off) {
        if (range->open == 0)
            return can_disable ? disabled() : Py_NewRef(Py_None);
        if ((stack = thread_shadow()) != NULL) {
            if (stack->depth < SHADOW_DEPTH)
                stack->codes[stack->depth] = NOT_PUSHED(code);
            stack->depth++;
        }
        Py_RETURN_NONE;
    }
    stack = thread_shadow();
    at = stack != NULL ? stack->depth : SHADOW_DEPTH;
    if (stack != NULL) {
        if (at < SHADOW_DEPTH) {
            stack->codes[at] = code;
            stack->starts[at] = 0;
        }
        stack->depth++;
    }
    range->open++;
    range_opened();
    if (range->measure_left > 0 && at < SHADOW_DEPTH) {
        unsigned long long before = budget_now();
        range_push(range);
        stack->starts[at] = budget_now();
        stack->costs[at] = stack->starts[at] - before;
    }
    else
        range_push(range);
    Py_RETURN_NONE;
}

/* The frame's range popped, if it pushed one (a frame already running when its code got
 * monitored, or one --budget left without a range, did not): the range of a frame below must
 * not close. A code turned off with none of its ranges open has its event disabled here. */
static PyObject* pop_range(RangeObject* range, PyObject* code, int can_disable)
{
    shadow_stack* stack = shadow != NULL ? shadow : thread_shadow();
    unsigned long long start = 0, cost = 0;
    if (stack != NULL) {
        Py_ssize_t top = stack->depth - 1;
        if (top >= 0 && top < SHADOW_DEPTH && stack->codes[top] == NOT_PUSHED(code)) {
            stack->depth = top;
            Py_RETURN_NONE;
        }
        if (top < 0 || (top < SHADOW_DEPTH && stack->codes[top] != code)) {
            if (can_disable && range->off && range->open == 0)
                return disabled();
            Py_RETURN_NONE; /* this frame pushed nothing */
        }
        if (top < SHADOW_DEPTH) {
            start = stack->starts[top];
            cost = stack->costs[top];
        }
        stack->depth = top;
    }
    if (start != 0) {
        unsigned long long end = budget_now();
        range_pop(range);
        budget_account(range, end - start, cost + (budget_now() - end));
    }
    else
        range_pop(range);
    if (range->open > 0)
        range->open--;
    range_closed();
    Py_RETURN_NONE;
}

/* PY_START: a coroutine's call opens its one range; any other frame pushes its range. */
static PyObject* monitoring_start(PyObject* callable, PyObject* const* args, size_t nargsf,
                                  PyObject* kwnames)
{
    RangeObject* range = range_to_push(args, PyVectorcall_NARGS(nargsf));
    (void)callable;
    (void)kwnames;
    if (range != NULL) {
        if (!spans_call(range, args[0]))
            return push_range(range, args[0], 1);
        coroutine_span_open(range);
    }
    Py_RETURN_NONE;
}

/* PY_RESUME, PY_THROW: the frame's range pushed again, except a coroutine's call range,
 * open since its start. */
static PyObject* monitoring_push(PyObject* callable, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames)
{
    RangeObject* range = range_to_push(args, PyVectorcall_NARGS(nargsf));
    (void)callable;
    (void)kwnames;
    if (range != NULL && !spans_call(range, args[0]))
        return push_range(range, args[0], 1);
    Py_RETURN_NONE;
}

/* PY_THROW: as PY_RESUME, but an event sys.monitoring does not let a callback disable. */
static PyObject* monitoring_throw(PyObject* callable, PyObject* const* args, size_t nargsf,
                                  PyObject* kwnames)
{
    RangeObject* range = range_to_push(args, PyVectorcall_NARGS(nargsf));
    (void)callable;
    (void)kwnames;
    if (range != NULL && !spans_call(range, args[0]))
        return push_range(range, args[0], 0);
    Py_RETURN_NONE;
}

static PyObject* monitoring_pop(PyObject* callable, PyObject* const* args, size_t nargsf,
                                PyObject* kwnames)
{
    RangeObject* range = extra_of(args, PyVectorcall_NARGS(nargsf));
    (void)callable;
    (void)kwnames;
    /* Still pending: this code never pushed (its first push settles it); a coroutine's call
     * range stays open across its awaits. */
    if (range != NULL && Py_IS_TYPE(range, &RangeType) && !spans_call(range, args[0]))
        return pop_range(range, args[0], 1);
    Py_RETURN_NONE;
}

/* PY_UNWIND: armed, it comes only while some thread has a range open; a thread with none open
 * has nothing to pop, whatever the code. */
static PyObject* monitoring_unwind(PyObject* callable, PyObject* const* args, size_t nargsf,
                                   PyObject* kwnames)
{
    shadow_stack* stack = shadow;
    if (coroutine_spans_open()) {
        RangeObject* range = extra_of(args, PyVectorcall_NARGS(nargsf));
        if (range != NULL && Py_IS_TYPE(range, &RangeType) && spans_call(range, args[0])) {
            coroutine_span_close(); /* an exception, a cancellation, GeneratorExit: the call is over */
            Py_RETURN_NONE;
        }
    }
    if (stack != NULL && stack->depth == 0)
        Py_RETURN_NONE;
    {
        RangeObject* range = extra_of(args, PyVectorcall_NARGS(nargsf));
        if (range != NULL && Py_IS_TYPE(range, &RangeType) && !spans_call(range, args[0]))
            return pop_range(range, args[0], 0);
    }
    Py_RETURN_NONE;
}

/* PY_RETURN: a coroutine's call ends its range; any other frame pops its range. */
static PyObject* monitoring_return(PyObject* callable, PyObject* const* args, size_t nargsf,
                                   PyObject* kwnames)
{
    RangeObject* range = extra_of(args, PyVectorcall_NARGS(nargsf));
    if (range != NULL && Py_IS_TYPE(range, &RangeType) && spans_call(range, args[0])) {
        coroutine_span_close();
        Py_RETURN_NONE;
    }
    return monitoring_pop(callable, args, nargsf, kwnames);
}

/* The callbacks are objects of their own callable type rather than builtin functions: the
 * interpreter calls them through their vectorcall slot directly, without the recursion check
 * and the extra indirection a METH_FASTCALL builtin goes through. Every monitored call makes
 * two such calls, and every frame an exception leaves, anywhere, one. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    const char* name;
} CallbackObject;

static PyObject* Callback_repr(CallbackObject* self)
{
    return PyUnicode_FromFormat("<autonvtx sys.monitoring callback %s>", self->name);
}

static PyTypeObject CallbackType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.MonitoringCallback",
    .tp_basicsize = sizeof(CallbackObject),
    .tp_vectorcall_offset = offsetof(CallbackObject, vectorcall),
    .tp_repr = (reprfunc)Callback_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = PyDoc_STR("A sys.monitoring callback, (code, offset, *rest): pushes "
                        "(monitoring_push) or pops (monitoring_pop) the Range attached to code."),
};

static int add_callback(PyObject* module, const char* name, vectorcallfunc call)
{
    CallbackObject* callback = PyObject_New(CallbackObject, &CallbackType);
    if (callback == NULL)
        return -1;
    callback->vectorcall = call;
    callback->name = name;
    if (PyModule_AddObject(module, name, (PyObject*)callback) < 0) {
        Py_DECREF(callback);
        return -1;
    }
    return 0;
}

static void free_shadow(void* stack)
{
    free(stack);
}

static int check_code(PyObject* code, const char* where)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a code object, not %.100s", where,
                     Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject* attach(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "attach(code, range)");
        return NULL;
    }
    if (check_code(args[0], "attach") < 0)
        return NULL;
    if (!Py_IS_TYPE(args[1], &RangeType) || ((RangeObject*)args[1])->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "attach: range must be an initialized Range");
        return NULL;
    }
    Py_INCREF(args[1]);
    /* The previous extra, if any, goes to release_range. */
    if (PyUnstable_Code_SetExtra(args[0], extra_index, args[1]) < 0) {
        Py_DECREF(args[1]);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject* lazy_local_events(PyObject* module, PyObject* arg)
{
    int on = PyObject_IsTrue(arg);
    (void)module;
    if (on < 0)
        return NULL;
    monitoring_lazy(on);
    Py_RETURN_NONE;
}

static PyObject* turn_on_later(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    long tool_id;
    unsigned long events;
    (void)module;
    if (nargs != 3 || check_code(args[0], "turn_on_later") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "turn_on_later(code, tool_id, events)");
        return NULL;
    }
    tool_id = PyLong_AsLong(args[1]);
    events = PyLong_AsUnsignedLongMask(args[2]);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(monitoring_turn_on_later((PyCodeObject*)args[0], (int)tool_id, events));
}

/* gap_probe(code, 0) gives `code` (which must have no monitoring data yet) data of this
 * module's with a number in the gap, no events, and out of date, as the walk leaves a pending
 * code; the caller runs the code once, so CPython instruments it; gap_probe(code, 1) then says
 * whether the number came through: only then does the walk keep styles there (else in code
 * extras). True where there is no gap to use (3.12); False from stage 0 where `code` has data. */
static PyObject* gap_probe(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    int stage;
    (void)module;
    if (nargs != 2 || check_code(args[0], "gap_probe") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "gap_probe(code, stage)");
        return NULL;
    }
    stage = PyObject_IsTrue(args[1]);
    if (stage < 0)
        return NULL;
    return PyBool_FromLong(monitoring_gap_probe((PyCodeObject*)args[0], stage));
}

int monitoring_ready(void)
{
    return extra_index >= 0;
}

int monitoring_attached(PyCodeObject* code)
{
    void* extra = NULL;
    (void)PyUnstable_Code_GetExtra((PyObject*)code, extra_index, &extra);
    return extra != NULL || monitoring_pending_in_data(code) != NULL;
}

int monitoring_attach(PyObject* code, PyObject* range)
{
    if (PyUnstable_Code_SetExtra(code, extra_index, range) < 0) {
        Py_DECREF(range);
        return -1;
    }
    return 0;
}

static PyObject* detach(PyObject* module, PyObject* code)
{
    (void)module;
    void* extra = NULL;
    if (check_code(code, "detach") < 0)
        return NULL;
    /* Only where there is one: setting NULL would give the code an extra block of its own.
     * A pending style in the code's monitoring data goes with the code's events. */
    (void)PyUnstable_Code_GetExtra(code, extra_index, &extra);
    if (extra != NULL && PyUnstable_Code_SetExtra(code, extra_index, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject* attached(PyObject* module, PyObject* code)
{
    void* extra = NULL;
    (void)module;
    if (check_code(code, "attached") < 0)
        return NULL;
    if (PyUnstable_Code_GetExtra(code, extra_index, &extra) < 0)
        return NULL;
    if (extra == NULL && (extra = monitoring_pending_in_data((PyCodeObject*)code)) != NULL) {
        extra = settle(code, (PendingStyleObject*)extra);
        if (extra == NULL)
            return PyErr_NoMemory();
    }
    else if (extra != NULL && !Py_IS_TYPE(extra, &RangeType)) {
        extra = settle(code, (PendingStyleObject*)extra);
        if (extra == NULL)
            return PyErr_NoMemory();
    }
    return Py_NewRef(extra != NULL ? (PyObject*)extra : Py_None);
}

static PyObject* has_range(PyObject* module, PyObject* code)
{
    (void)module;
    if (check_code(code, "has_range") < 0)
        return NULL;
    return PyBool_FromLong(monitoring_attached((PyCodeObject*)code));
}

/* The bytes of the interpreter's table for PY_UNWIND and PY_THROW, for ranges.py to check
 * the table against the public set_events before arming; None where it is unknown. */
static PyObject* read_global_events(PyObject* module, PyObject* unused)
{
    (void)module;
    (void)unused;
    uint8_t* tools = global_events();
    if (tools == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(ii)", tools[EVENT_PY_UNWIND], tools[EVENT_PY_THROW]);
}

static PyObject* arm_unwind(PyObject* module, PyObject* arg)
{
    (void)module;
    long tool_id = PyLong_AsLong(arg);
    if (tool_id == -1 && PyErr_Occurred())
        return NULL;
    open_ranges = 0;
    if (tool_id < 0) {
        unwind_tools = NULL;
        Py_RETURN_NONE;
    }
    uint8_t* tools = global_events();
    if (tools == NULL || tool_id > 7) {
        PyErr_SetString(PyExc_ValueError, "arm_unwind: no table of global events here, or a bad tool id");
        return NULL;
    }
    unwind_bit = (uint8_t)(1u << tool_id);
    unwind_tools = tools + EVENT_PY_UNWIND;
    *unwind_tools &= (uint8_t)~unwind_bit; /* no range is open yet */
    Py_RETURN_NONE;
}

int monitoring_walk_ready(void); /* monitoringwalk.c */

static PyMethodDef monitoring_methods[] = {
    {"global_events", (PyCFunction)read_global_events, METH_NOARGS,
     "global_events()\n--\n\nThe interpreter's tool bits for PY_UNWIND and PY_THROW, read from its "
     "table of global events; None where that table's place is unknown."},
    {"arm_unwind", (PyCFunction)arm_unwind, METH_O,
     "arm_unwind(tool_id, /)\n--\n\nFrom now on, PY_UNWIND is on for `tool_id` only while a range "
     "pushed by the callbacks is open (-1: no longer; set_events decides)."},
    {"lazy_local_events", (PyCFunction)lazy_local_events, METH_O,
     "lazy_local_events(on, /)\n--\n\nWhether the native walk turns a code object's local events on "
     "as set_local_events does but leaves its instrumentation to its first run (the default)."},
    {"turn_on_later", (PyCFunction)(void (*)(void))turn_on_later, METH_FASTCALL,
     "turn_on_later(code, tool_id, events, /) -> bool\n--\n\nset_local_events(tool_id, code, events) "
     "with the instrumentation left to the code's next run; False where it left it to the caller."},
    {"gap_probe", (PyCFunction)(void (*)(void))gap_probe, METH_FASTCALL,
     "gap_probe(code, stage, /) -> bool\n--\n\nStage 0: mark the spare bytes of `code`'s new "
     "monitoring data (3.13); run the code; stage 1: whether the mark came through its "
     "instrumentation (else pending styles stay in code extras)."},
    {"has_range", (PyCFunction)has_range, METH_O,
     "has_range(code, /)\n--\n\nWhether `code` has a Range, or the PendingRange its first run "
     "makes one from."},
    {"attach", (PyCFunction)(void (*)(void))attach, METH_FASTCALL,
     "attach(code, range, /)\n--\n\nAttach `range` to `code` (replacing any attached before)."},
    {"detach", (PyCFunction)detach, METH_O,
     "detach(code, /)\n--\n\nRelease the Range attached to `code`, if any."},
    {"attached", (PyCFunction)attached, METH_O,
     "attached(code, /)\n--\n\nThe Range attached to `code`, or None."},
    {NULL, NULL, 0, NULL},
};

int monitoring_add_to_module(PyObject* module)
{
    /* One index per process (this module is single-phase, never re-initialised); there are
     * 255 (MAX_CO_EXTRA_USERS), shared with other users such as debuggers' extensions. */
    if (extra_index < 0) {
        if (pthread_key_create(&shadow_key, free_shadow) != 0) {
            PyErr_SetString(PyExc_OSError, "autonvtx: pthread_key_create failed");
            return -1;
        }
        extra_index = PyUnstable_Eval_RequestCodeExtraIndex(release_range);
        if (extra_index < 0) {
            /* No index left: the module still loads; ranges.py reports the code engine
             * unavailable (no monitoring_push attribute). */
            PyErr_Clear();
            return 0;
        }
    }
    if (monitoring_walk_ready() < 0)
        return -1;
    if (PyType_Ready(&CallbackType) < 0 || add_callback(module, "monitoring_push", monitoring_push) < 0 ||
        add_callback(module, "monitoring_pop", monitoring_pop) < 0 ||
        add_callback(module, "monitoring_unwind", monitoring_unwind) < 0 ||
        add_callback(module, "monitoring_start", monitoring_start) < 0 ||
        add_callback(module, "monitoring_throw", monitoring_throw) < 0 ||
        add_callback(module, "monitoring_return", monitoring_return) < 0)
        return -1;
    if (coroutine_spans_ready() < 0)
        return -1;
    return PyModule_AddFunctions(module, monitoring_methods);
}

#else

int monitoring_add_to_module(PyObject* module)
{
    (void)module;
    return 0;
}

#endif
