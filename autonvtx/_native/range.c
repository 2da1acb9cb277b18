/*
 * Range: one function's range, prepared once (domain handle, registered message, ARGB color,
 * category in an nvtxEventAttributes_t). push()/pop() for Python callers; called as wrapt
 * calls a wrapper, `range(wrapped, instance, args, kwargs)`, it pushes, calls and pops;
 * drive(inner, kind) puts a range around each resumption of a generator or coroutine.
 */
#include "nvtxclient.h"

#include <stdio.h>
#include <time.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every prepared Range, newest first (the GIL guards the list). */
static RangeObject* newest_range = NULL;
/* rebind_ranges() ran in this process: a domain handle kept from before it (the code engine's
 * pending ranges keep one) may be the parent's, so a Range made since asks by name. */
static int ranges_rebound = 0;

static void range_link(RangeObject* self)
{
    self->newer = NULL;
    self->older = newest_range;
    if (newest_range != NULL)
        newest_range->newer = self;
    newest_range = self;
}

static void range_unlink(RangeObject* self)
{
    if (self->newer != NULL)
        self->newer->older = self->older;
    else if (newest_range == self)
        newest_range = self->older;
    if (self->older != NULL)
        self->older->newer = self->newer;
    self->older = self->newer = NULL;
}

/* The message of `self` registered in `domain` (NULL: no tool), as the event attributes hold it. */
static void range_register(RangeObject* self, nvtxDomainHandle_t domain, const char* message_utf8)
{
    nvtxStringHandle_t registered;

    self->domain = domain;
    self->enabled = self->domain != NULL;
    registered = self->enabled ? nvtxDomainRegisterStringA(self->domain, message_utf8) : NULL;
    if (registered != NULL) {
        self->attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        self->attributes.message.registered = registered;
    } else {
        self->attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        self->attributes.message.ascii = NULL;
    }
}

/* Fill a fresh Range in the domain `domain` (its handle) named `domain_name`: registered
 * message and the event attributes. */
static int range_prepare_in(RangeObject* self, nvtxDomainHandle_t domain, PyObject* domain_name,
                            PyObject* message, unsigned long color, unsigned long category)
{
    const char* message_utf8 = PyUnicode_AsUTF8(message);

    if (message_utf8 == NULL)
        return -1;
    if (ranges_rebound) {
        const char* domain_utf8 = PyUnicode_AsUTF8(domain_name);
        if (domain_utf8 == NULL)
            return -1;
        domain = nvtxDomainCreateA(domain_utf8);
    }
    memset(&self->attributes, 0, sizeof self->attributes);
    self->attributes.version = NVTX_VERSION;
    self->attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    /* The same fields nvtx's EventAttributes sets: ARGB color always, category 0 = none. */
    self->attributes.colorType = NVTX_COLOR_ARGB;
    self->attributes.color = (uint32_t)color;
    self->attributes.category = (uint32_t)category; /* without RANGE_COROUTINE_STEPS */
    self->coroutine_steps = (category & RANGE_COROUTINE_STEPS) != 0;
    self->off = 0;
    self->measure_left = budget_calls;
    self->own_ns = self->cost_ns = 0;
    PyMem_RawFree(self->costs); /* a second __init__ starts measuring again */
    self->costs = NULL;
    self->measured = 0;
    self->open = 0;
    self->flight = 0;
    self->attributes.payloadType = NVTX_PAYLOAD_UNKNOWN;
    range_register(self, domain, message_utf8);
    if (flight_is_armed() && flight_matches(PyUnicode_AsUTF8(domain_name), message_utf8)) {
        self->flight = 1;
        self->measure_left = FLIGHT_MEASURED;
    }
    Py_INCREF(domain_name);
    self->domain_name = domain_name;
    Py_INCREF(message);
    self->message = message;
    range_link(self);
    return 0;
}

/* range_prepare_in(), the domain created from its name. */
static int range_prepare(RangeObject* self, PyObject* domain_name, PyObject* message,
                         unsigned long color, unsigned long category)
{
    const char* domain_utf8 = PyUnicode_AsUTF8(domain_name);

    if (domain_utf8 == NULL)
        return -1;
    if (*domain_utf8 == '\0') {
        PyErr_SetString(PyExc_ValueError, "Range: the domain needs a name");
        return -1;
    }
    /* With no tool attached every NVTX call is a no-op returning 0: a NULL handle is how this
     * client learns that nobody listens (nvtx's Python Domain asks nvtxDomainIsEnabled). */
    return range_prepare_in(self, nvtxDomainCreateA(domain_utf8), domain_name, message, color,
                            category);
}

PyDoc_STRVAR(rebind_ranges_doc,
"rebind_ranges() -> int\n--\n\n"
"Ask the NVTX tool again for every Range's (and region's) domain handle and registered\n"
"message; returns how many have a tool. For a fork child under a tool that starts afresh there (Nsight Systems\n"
"drops a forked child's events made with its parent's handles).");

static PyObject* rebind_ranges(PyObject* module, PyObject* unused)
{
    RangeObject* r;
    long bound = 0;
    (void)module;
    (void)unused;
    ranges_rebound = 1;
    for (r = newest_range; r != NULL; r = r->older) {
        const char* domain_utf8 = PyUnicode_AsUTF8(r->domain_name);
        const char* message_utf8 = PyUnicode_AsUTF8(r->message);
        if (domain_utf8 == NULL || message_utf8 == NULL)
            return NULL;
        range_register(r, nvtxDomainCreateA(domain_utf8), message_utf8);
        bound += r->enabled;
    }
    return PyLong_FromLong(bound + regions_rebind());
}

PyDoc_STRVAR(name_category_doc,
"name_category(domain, category, name, /) -> bool\n--\n\n"
"Name category id `category` of NVTX domain `domain` (nvtxDomainNameCategoryA); False when no\n"
"tool is attached.");

static PyObject* name_category(PyObject* module, PyObject* args)
{
    const char* domain_utf8;
    const char* name_utf8;
    unsigned long category;
    nvtxDomainHandle_t domain;
    (void)module;
    if (!PyArg_ParseTuple(args, "sks:name_category", &domain_utf8, &category, &name_utf8))
        return NULL;
    domain = nvtxDomainCreateA(domain_utf8);
    if (domain == NULL)
        Py_RETURN_FALSE;
    nvtxDomainNameCategoryA(domain, (uint32_t)category, name_utf8);
    Py_RETURN_TRUE;
}

/* ---- --budget PCT ----
 *
 * Every Range made once a budget is set times its first `budget_calls` ranges: the time
 * between push and pop (its own time, nested ranges included) and the time in the push and
 * pop themselves (what the attached NVTX tool costs: measured where the ranges are made,
 * several times more under Nsight Systems than under the recorder). When the median cost is
 * more than `budget_percent` of the mean own time, the range is turned off: no new range is
 * pushed (the wrapper calls the function directly, the code engine's callbacks return
 * sys.monitoring.DISABLE once none of its ranges is open); ranges already open are popped as
 * they would have been. */

int budget_calls;
static double budget_percent;
static int budget_verbose;
static PyObject* budget_off; /* the Ranges turned off, in order */

unsigned long long budget_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}

/* The trace's note of it, where and when it happened: an NVTX mark in the range's domain
 * (the recorder and Nsight Systems both keep marks), "autonvtx --budget: NAME turned off ...". */
static void budget_mark(RangeObject* r, const char* name, double mean_cost, double mean_own)
{
    char text[512];
    nvtxEventAttributes_t attributes;
    if (!r->enabled)
        return;
    snprintf(text, sizeof text, "autonvtx --budget: %s turned off (its range %.0f ns, its call %.0f ns)",
             name != NULL ? name : "?", mean_cost, mean_own);
    memset(&attributes, 0, sizeof attributes);
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.colorType = NVTX_COLOR_ARGB;
    attributes.color = r->attributes.color;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = text;
    nvtxDomainMarkEx(r->domain, &attributes);
}

static int compare_costs(const void* a, const void* b)
{
    unsigned int x = *(const unsigned int*)a, y = *(const unsigned int*)b;
    return (x > y) - (x < y);
}

void budget_account(RangeObject* r, unsigned long long own, unsigned long long cost)
{
    double mean_own, range_cost;
    const char* name;
    if (r->flight) { /* --flight's range: timed at every instance, never turned off */
        name = PyUnicode_AsUTF8(r->message);
        if (name == NULL)
            PyErr_Clear();
        flight_instance(name, own);
        return;
    }
    if (r->measure_left <= 0)
        return; /* decided while this one was open (recursion, another thread) */
    if (r->costs == NULL && r->measured == 0) /* room for every measured range: measured + left */
        r->costs = PyMem_RawMalloc((size_t)r->measure_left * sizeof *r->costs);
    if (r->costs != NULL)
        r->costs[r->measured] = cost < UINT_MAX ? (unsigned int)cost : UINT_MAX;
    r->measured += 1;
    r->own_ns += own;
    r->cost_ns += cost;
    if (--r->measure_left > 0)
        return;
    mean_own = (double)r->own_ns / r->measured;
    range_cost = (double)r->cost_ns / r->measured; /* the mean, where there was no room */
    if (r->costs != NULL) {
        qsort(r->costs, (size_t)r->measured, sizeof *r->costs, compare_costs);
        range_cost = r->costs[r->measured / 2];
        PyMem_RawFree(r->costs);
        r->costs = NULL;
    }
    r->cost_ns = (unsigned long long)(range_cost * r->measured); /* what budget_turned_off() reports */
    if (budget_calls <= 0 || range_cost * 100.0 <= budget_percent * mean_own)
        return; /* kept (or the budget ended while it was measured) */
    r->off = 1;
    if (budget_off != NULL && PyList_Append(budget_off, (PyObject*)r) < 0)
        PyErr_Clear();
    name = r->message != NULL ? PyUnicode_AsUTF8(r->message) : NULL;
    if (name == NULL)
        PyErr_Clear();
    budget_mark(r, name, range_cost, mean_own);
    if (budget_verbose) {
        /* No Python code runs here (this may be a sys.monitoring callback): C stdio. */
        fprintf(stderr,
                "autonvtx: --budget: %s turned off: its range costs %.0f ns (median), %.1f%% of its %.0f ns "
                "mean over its first %d calls\n",
                name != NULL ? name : "?", range_cost, mean_own > 0 ? 100.0 * range_cost / mean_own : 100.0,
                mean_own, r->measured);
        fflush(stderr);
    }
}

/* --flight armed: every Range made so far is looked at (those made from now on are, as they are
 * made). */
int range_flag_flight(void)
{
    RangeObject* r;
    for (r = newest_range; r != NULL; r = r->older) {
        const char* domain = PyUnicode_AsUTF8(r->domain_name);
        const char* message = PyUnicode_AsUTF8(r->message);
        if (domain == NULL || message == NULL)
            return -1;
        if (!r->flight && flight_matches(domain, message)) {
            r->flight = 1;
            r->off = 0;
            r->measure_left = FLIGHT_MEASURED;
        }
    }
    return 0;
}

PyDoc_STRVAR(set_budget_doc,
"set_budget(percent, calls, verbose, /)\n--\n\n"
"From now on every Range made measures its first `calls` ranges and turns off when its range "
"costs more than `percent`% of its own time (calls 0: no budget). `verbose`: one line on "
"stderr as each turns off.");

static PyObject* set_budget(PyObject* module, PyObject* args)
{
    double percent;
    int calls, verbose;
    (void)module;
    if (!PyArg_ParseTuple(args, "dip:set_budget", &percent, &calls, &verbose))
        return NULL;
    if (budget_off == NULL && (budget_off = PyList_New(0)) == NULL)
        return NULL;
    budget_percent = percent;
    budget_calls = calls > 0 ? calls : 0;
    budget_verbose = verbose;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(budget_turned_off_doc,
"budget_turned_off()\n--\n\n"
"[(domain, message, mean cost ns, mean own ns), ...]: the ranges --budget turned off, in order.");

static PyObject* budget_turned_off(PyObject* module, PyObject* unused)
{
    PyObject* result = PyList_New(0);
    Py_ssize_t i;
    (void)module;
    (void)unused;
    if (result == NULL || budget_off == NULL)
        return result;
    for (i = 0; i < PyList_GET_SIZE(budget_off); ++i) {
        RangeObject* r = (RangeObject*)PyList_GET_ITEM(budget_off, i);
        int calls = r->measured > 0 ? r->measured : 1;
        PyObject* item = Py_BuildValue("(OOdd)", r->domain_name, r->message, (double)r->cost_ns / calls,
                                       (double)r->own_ns / calls);
        if (item == NULL || PyList_Append(result, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(item);
    }
    return result;
}

static PyMethodDef range_functions[] = {
    {"set_budget", set_budget, METH_VARARGS, set_budget_doc},
    {"budget_turned_off", budget_turned_off, METH_NOARGS, budget_turned_off_doc},
    {"rebind_ranges", rebind_ranges, METH_NOARGS, rebind_ranges_doc},
    {"name_category", name_category, METH_VARARGS, name_category_doc},
    {NULL, NULL, 0, NULL},
};

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
    if (self->domain_name != NULL)
        range_unlink(self);
    Py_XDECREF(self->domain_name);
    Py_XDECREF(self->message);
    PyMem_RawFree(self->costs);
    Py_TYPE(self)->tp_free((PyObject*)self);
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

/* A start/end range (nvtxDomainRangeStartEx): not tied to a thread's stack, for ranges that
 * interleave (a module's backward pass, run by autograd's threads). 0 when no tool listens. */
static PyObject* Range_start(RangeObject* self, PyObject* unused)
{
    (void)unused;
    if (!self->enabled)
        return PyLong_FromLong(0);
    return PyLong_FromUnsignedLongLong(
        (unsigned long long)nvtxDomainRangeStartEx(self->domain, &self->attributes));
}

static PyObject* Range_end(RangeObject* self, PyObject* id)
{
    unsigned long long value = PyLong_AsUnsignedLongLong(id);
    if (value == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (self->enabled && value != 0)
        nvtxDomainRangeEnd(self->domain, (nvtxRangeId_t)value);
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
    {
        range_step step = range_enter(self);
        result = PyObject_Call(args[0], call_args, call_kwargs);
        range_leave(self, step);
    }
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

static PyObject* Range_get_watched(RangeObject* self, void* closure)
{
    (void)closure;
    return PyBool_FromLong(self->flight);
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

static PyObject* Range_drive(RangeObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    long kind;
    if (nargs != 2 || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "drive(inner, kind: int)");
        return NULL;
    }
    kind = PyLong_AsLong(args[1]);
    if (kind < 0 || kind >= KIND_COUNT) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "drive: kind must be 0 to %d", KIND_COUNT - 1);
        return NULL;
    }
    Py_INCREF(args[0]);
    return steps_drive(self, args[0], (int)kind);
}

static PyObject* Range_steps(RangeObject* self, PyObject* inner)
{
    return steps_new(inner, self);
}

static PyMethodDef Range_methods[] = {
    {"steps", (PyCFunction)Range_steps, METH_O,
     "steps(inner, /)\n--\n\nA RangedSteps driving `inner` with this range around each resumption."},
    {"push", (PyCFunction)Range_push, METH_NOARGS, "Push this range on the calling thread."},
    {"drive", (PyCFunction)(void (*)(void))Range_drive, METH_FASTCALL,
     "drive(inner, kind, /)\n--\n\n`inner` (what a generator, coroutine or async generator "
     "function returned; `kind` as suspending_kind() gives) with this range around each of its "
     "resumptions."},
    {"pop", (PyCFunction)Range_pop, METH_NOARGS, "Pop the innermost range of this domain on the calling thread."},
    {"start", (PyCFunction)Range_start, METH_NOARGS,
     "start()\n--\n\nStart this range as a start/end range (any thread may end it); its id, 0 "
     "when no tool is attached."},
    {"end", (PyCFunction)Range_end, METH_O, "end(id, /)\n--\n\nEnd the start/end range `id` that start() gave."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Range_getset[] = {
    {"enabled", (getter)Range_get_enabled, NULL, "Whether an NVTX tool is attached to this client.", NULL},
    {"watched", (getter)Range_get_watched, NULL, "Whether --flight times each of its ranges (flightwatch.c).", NULL},
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

PyTypeObject RangeType = {
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


RangeObject* range_new_prepared(PyObject* domain_name, PyObject* message, unsigned long color,
                                unsigned long category)
{
    RangeObject* range = (RangeObject*)Range_new(&RangeType, NULL, NULL);
    if (range == NULL)
        return NULL;
    if (range_prepare(range, domain_name, message, color, category) < 0) {
        Py_DECREF(range);
        return NULL;
    }
    return range;
}

RangeObject* range_new_in_domain(nvtxDomainHandle_t domain, PyObject* domain_name, PyObject* message,
                                 unsigned long color, unsigned long category)
{
    RangeObject* range = (RangeObject*)Range_new(&RangeType, NULL, NULL);
    if (range == NULL)
        return NULL;
    if (range_prepare_in(range, domain, domain_name, message, color, category) < 0) {
        Py_DECREF(range);
        return NULL;
    }
    return range;
}

/* The style a range will have, held in its place until its first use (a code object's first
 * run, a wholesale wrapper's first call): most functions of a package targeted wholesale are
 * never called, and a Range costs 120 bytes and a registered string each. */
static void PendingStyle_dealloc(PendingStyleObject* self)
{
    Py_XDECREF(self->domain_name);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

PyTypeObject PendingStyleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "autonvtx._nvtxclient.PendingStyle",
    .tp_basicsize = sizeof(PendingStyleObject),
    .tp_dealloc = (destructor)PendingStyle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = PyDoc_STR("The style (domain, color, category) of a range made on its first use."),
};

PyObject* pending_style_new(nvtxDomainHandle_t domain, PyObject* domain_name, unsigned long color,
                            unsigned long category)
{
    PendingStyleObject* style = PyObject_New(PendingStyleObject, &PendingStyleType);
    if (style == NULL)
        return NULL;
    style->domain = domain;
    style->domain_name = Py_NewRef(domain_name);
    style->color = color;
    style->category = category;
    return (PyObject*)style;
}

int range_add_to_module(PyObject* module)
{
    if (PyType_Ready(&RangeType) < 0 || PyType_Ready(&PendingStyleType) < 0)
        return -1;
    Py_INCREF(&RangeType);
    if (PyModule_AddObject(module, "Range", (PyObject*)&RangeType) < 0) {
        Py_DECREF(&RangeType);
        return -1;
    }
    return PyModule_AddFunctions(module, range_functions);
}
