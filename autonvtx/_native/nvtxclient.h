/*
 * What the parts of autonvtx._nvtxclient share: the Range object and the hooks each part
 * gives module initialisation.
 *
 *   nvtxclient.c  the module: thread naming, the recorder benchmark loop, initialisation
 *   range.c       Range: one function's range, prepared once
 *   ranged.c      the ranged function wrapper type (the wrapper engine's per-call path)
 *   steps.c       RangedSteps: a range around each resumption of a generator or async generator
 *   coroutine.c   RangedCoroutine: a coroutine's proxy, a range around each of its resumptions
 *   monitoring.c  the code engine's sys.monitoring callbacks (Python 3.12+)
 *   monitoringwalk.c  the code engine's side of uniform.c's walk
 *   spans.c       a coroutine call's one start/end range under the code engine
 *   globalevents.c  CPython's monitoring structures: the interpreter's global events (monitoring.c
 *                 switches PY_UNWIND) and a code's monitoring data (lazy local events, where a
 *                 pending style is kept)
 *   regions.c     regions inside functions: loop iterations, line spans, capture windows (3.12+)
 *   uniform.c     the walk of a module one rule selects as a whole, for both engines
 *   wrapping.c    the wrap engine's side of that walk: its table of wrappers, its writes
 *   flightwatch.c --flight under another tool: the watched range timed, capture ranges after slow instances
 */
#ifndef AUTONVTX_NVTXCLIENT_H
#define AUTONVTX_NVTXCLIENT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <nvtx3/nvToolsExt.h>

#include <limits.h>

typedef struct RangeObject {
    PyObject_HEAD
    nvtxDomainHandle_t domain;
    nvtxEventAttributes_t attributes;
    int enabled;        /* a tool is attached: NVTX gave this client a domain handle */
    int coroutine_steps; /* a coroutine of this range gets a range per resumption, not per call */
    /* --budget (range.c): its first budget_calls ranges are timed (`measure_left` to go);
     * `off` once its range costs more than the budget's share of its own time. `open`
     * counts the code engine's pushed ranges of it not yet popped, on every thread. */
    int off;
    int measure_left;
    unsigned long long own_ns, cost_ns;
    /* Each measured range's cost, while measuring: the decision takes their median (one range
     * caught by a page fault or a preemption moves a mean by microseconds). Freed once decided. */
    unsigned int* costs;
    int measured;
    Py_ssize_t open;
    /* The range --flight watches under another tool (flightwatch.c): `measure_left` stays up, so
     * each of its ranges is timed, and budget_account() hands it to flight_instance(). */
    int flight;
    PyObject* domain_name;
    PyObject* message;
    vectorcallfunc vectorcall;
    /* Every prepared Range, linked (range.c): a fork child under another tool re-makes their
     * handles (rebind_ranges). Touched only when a Range is made or freed. */
    struct RangeObject* older;
    struct RangeObject* newer;
} RangeObject;

extern PyTypeObject RangeType;

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

/* A flag beside the category id in the `category` every Range maker takes (NVTX's category is
 * 32 bits, the makers' argument an unsigned long, 64 bits here): the rule's `coroutine =
 * "resumptions"`. Carried this way, it reaches the Ranges the native walks make on first use
 * through their pending styles, unchanged. */
#define RANGE_COROUTINE_STEPS (1UL << 32)

/* A coroutine call's one range (`coroutine = "call"`): started where it first runs, ended
 * where it returns, raises or is closed, on any thread: an NVTX start/end range, which a tool
 * keeps apart from the thread's push/pop stack (nsys draws it on a row of its own), so
 * coroutines interleaved on one thread never mis-nest. 0 where no tool listens. */
static inline nvtxRangeId_t range_start(RangeObject* r)
{
    return r->enabled ? nvtxDomainRangeStartEx(r->domain, &r->attributes) : 0;
}

static inline void range_end(RangeObject* r, nvtxRangeId_t id)
{
    if (r->enabled)
        nvtxDomainRangeEnd(r->domain, id);
}

/* --budget PCT (range.c): the calls a range's cost is measured over; 0 when no budget is set. */
extern int budget_calls;
unsigned long long budget_now(void);
/* One measured range: `own` ns between its push and pop, `cost` ns in the push and pop
 * themselves (the NVTX tool's time); the last of the measured ones decides. */
void budget_account(RangeObject* r, unsigned long long own, unsigned long long cost);

/* --flight under another tool (flightwatch.c): whether a range so named is the watched one; one
 * instance of it (its name, its time between push and pop); every Range made so far flagged
 * when it is (range.c). */
int flight_is_armed(void);
int flight_matches(const char* domain, const char* message);
void flight_instance(const char* name, unsigned long long duration);
int range_flag_flight(void);
/* What a flight Range keeps as `measure_left`: never counted down. */
#define FLIGHT_MEASURED INT_MAX

/* A range pushed around a step of work, or not (its function turned off by the budget): the
 * step's push and pop, timed while the range is measured. What range_enter() returns goes to
 * range_leave(): a pop only where there was a push, whatever the budget decided between. */
typedef struct {
    int pushed;
    unsigned long long start, cost;
} range_step;

static inline range_step range_enter(RangeObject* r)
{
    range_step step = {0, 0, 0};
    unsigned long long before;
    if (!r->enabled || r->off)
        return step;
    step.pushed = 1;
    if (r->measure_left <= 0) {
        nvtxDomainRangePushEx(r->domain, &r->attributes);
        return step;
    }
    before = budget_now();
    nvtxDomainRangePushEx(r->domain, &r->attributes);
    step.start = budget_now();
    step.cost = step.start - before;
    return step;
}

static inline void range_leave(RangeObject* r, range_step step)
{
    unsigned long long end;
    if (!step.pushed)
        return;
    if (step.start == 0) {
        nvtxDomainRangePop(r->domain);
        return;
    }
    end = budget_now();
    nvtxDomainRangePop(r->domain);
    budget_account(r, end - step.start, step.cost + (budget_now() - end));
}

/* `function` called inside `range` (a Range) with the caller's arguments untouched: pushed and
 * popped, timed while --budget measures it, or not pushed once the budget turned it off. */
static inline PyObject* ranged_call_in(RangeObject* range, PyObject* function, PyObject* const* args,
                                       size_t nargsf, PyObject* kwnames)
{
    PyObject* result;

    if (!range->enabled || range->off) /* off: --budget */
        return PyObject_Vectorcall(function, args, nargsf, kwnames);
    if (range->measure_left > 0) {
        range_step step = range_enter(range);
        result = PyObject_Vectorcall(function, args, nargsf, kwnames);
        range_leave(range, step);
        return result;
    }
    nvtxDomainRangePushEx(range->domain, &range->attributes);
    result = PyObject_Vectorcall(function, args, nargsf, kwnames);
    nvtxDomainRangePop(range->domain);
    return result;
}

/* A new initialised Range (range.c). */
RangeObject* range_new_prepared(PyObject* domain_name, PyObject* message, unsigned long color,
                                unsigned long category);

/* A new initialised Range in a domain already created (`domain`: its handle, NULL when no
 * tool is attached), for callers that make many (range.c). */
RangeObject* range_new_in_domain(nvtxDomainHandle_t domain, PyObject* domain_name, PyObject* message,
                                 unsigned long color, unsigned long category);

/* cls(function, range) for `cls` from ranged_function_type (ranged.c); None when a ranged
 * wrapper cannot serve `function` (a generator-like one before set_drivers()). */
PyObject* ranged_make(PyObject* cls, PyObject* function, RangeObject* range);

/* What wrapt's __wrapped__ gives for `wrapper`, read where its type's layout is known (a
 * wrapper of the type ranged.c fills from its template: the word wrapt keeps its wrapped
 * object in), borrowed; NULL where it is not known (the caller asks for __wrapped__). */
PyObject* ranged_wrapped_of(PyObject* wrapper);

/* The same, its Range (`message` in `domain`, with `color` and `category`) made on its first
 * call (ranged.c): for walks that wrap many functions, most never called. */
PyObject* ranged_make_pending(PyObject* cls, PyObject* function, nvtxDomainHandle_t domain,
                              PyObject* domain_name, PyObject* message, unsigned long color,
                              unsigned long category);

#if PY_VERSION_HEX >= 0x030C0000
/* The code engine's attachment of Ranges to code objects (monitoring.c): whether the code
 * extra index exists, whether `code` has a Range (or a PendingRange), attaching one (stealing
 * `range`), and a PendingRange: what a code object runs its first time with (its Range, named
 * by its co_qualname, is made then), one per style for the process (a new reference). */
int monitoring_ready(void);
int monitoring_attached(PyCodeObject* code);
int monitoring_attach(PyObject* code, PyObject* range);
PyObject* monitoring_pending(nvtxDomainHandle_t domain, PyObject* domain_name, unsigned long color,
                             unsigned long category);
/* set_local_events(tool_id, code, events), the instrumentation left to the code's first run;
 * 0 when the caller must call set_local_events itself (globalevents.c). */
int monitoring_turn_on_later(PyCodeObject* code, int tool_id, unsigned long events);
/* The same for a code with no range yet, `style` (a monitoring_pending() style) its range's
 * until its first run, kept where it costs least: in the code's monitoring data where
 * allocating it leaves room, else as its code extra. 1: done; 0: the caller attaches and calls
 * set_local_events itself; -1: an error. */
int monitoring_turn_on_pending(PyCodeObject* code, int tool_id, unsigned long events, PyObject* style);
#endif

#if PY_VERSION_HEX >= 0x030C0000
/* A coroutine call's one range under the code engine (spans.c): whether `range` on `code` is
 * one, opening it for the running coroutine, closing the running coroutine's, whether any is
 * open, and the set-up at module initialisation. */
static inline int spans_call(RangeObject* range, PyObject* code)
{
    return !range->coroutine_steps && (((PyCodeObject*)code)->co_flags & CO_COROUTINE);
}
void coroutine_span_open(RangeObject* range);
void coroutine_span_close(void);
int coroutine_spans_open(void);
int coroutine_spans_ready(void);
#endif

/* What a generator-like function's call returns, in the order of steps.c's drivers. */
enum suspending_kind {
    KIND_GENERATOR,
    KIND_ITERABLE_COROUTINE, /* a generator function decorated by types.coroutine */
    KIND_COROUTINE,
    KIND_ASYNC_GENERATOR,
    KIND_COUNT
};

/* The kind of a function with these code flags; -1 when its calls do not suspend. */
int suspending_kind(int co_flags);

/* `inner` (a new reference, or NULL) driven with a range around each of its resumptions,
 * in an object of the type it has (steps.c); `inner` itself when it is not of the type
 * `kind` promises, or when no NVTX tool listens. Steals `inner`. */
PyObject* steps_drive(RangeObject* range, PyObject* inner, int kind);

/* The style of a range made on its first use (range.c): the code engine's pending range and
 * a wholesale wrapper's, one type. */
typedef struct {
    PyObject_HEAD
    nvtxDomainHandle_t domain;
    PyObject* domain_name;
    unsigned long color;
    unsigned long category;
} PendingStyleObject;
extern PyTypeObject PendingStyleType;
PyObject* pending_style_new(nvtxDomainHandle_t domain, PyObject* domain_name, unsigned long color,
                            unsigned long category);

/* A RangedSteps driving `inner` (steps.c). */
PyObject* steps_new(PyObject* inner, RangeObject* range);

/* inner.throw(*args) inside `range`, marking `*started` (steps.c; the coroutine proxy too). */
PyObject* steps_throw_into(PyObject* inner, RangeObject* range, int* started, PyObject* const* args,
                           Py_ssize_t nargs);

/* `inner` (a coroutine, stolen) behind a RangedCoroutine pushing `range` around each of its
 * resumptions, and the type's set-up at module initialisation (coroutine.c). */
PyObject* coroutine_proxy_new(PyObject* inner, RangeObject* range);
int coroutine_proxy_ready(void);

/* Whether ranges.py gave steps.c the Python functions it drives through (set_drivers). */
int steps_ready(void);

int range_add_to_module(PyObject* module);
int ranged_add_to_module(PyObject* module);
int steps_add_to_module(PyObject* module);
int monitoring_add_to_module(PyObject* module);
int regions_add_to_module(PyObject* module);

/* Ask the NVTX tool again for every Region's handles (rebind_ranges calls it in a fork child);
 * returns how many have a tool. */
long regions_rebind(void);
int uniform_add_to_module(PyObject* module);
int modulepath_add_to_module(PyObject* module);
int chainedloader_add_to_module(PyObject* module);
int chainedfinder_add_to_module(PyObject* module);
int deadline_add_to_module(PyObject* module);
int flightwatch_add_to_module(PyObject* module);
int shapes_add_to_module(PyObject* module);

/* A rule with `shapes = true` (shapes.c): a ranged function wrapper (ranged.c) whose range field
 * holds a ShapedRanges calls shapes_call(), which picks the call's Range by its arguments. */
extern PyTypeObject ShapedType;
PyObject* shapes_call(PyObject* shaped, PyObject* function, PyObject* const* args, size_t nargsf,
                      PyObject* kwnames);

/* sys.<name> as PySys_GetObject gives it (borrowed), without making a str of the name each
 * time; NULL with an error set where it is missing (chainedloader.c). */
PyObject* sys_attribute(PyObject* name);

/* The exception being raised, taken (normalized; a new reference): its matching checked first
 * (uniform.c). */
PyObject* take_exception(void);
/* getattr(value, name) without an AttributeError (uniform.c): 1 (*found a new reference), 0
 * where it has none (*found NULL), -1 on another error; 3.13's PyObject_GetOptionalAttr. */
int optional_attribute(PyObject* value, PyObject* name, PyObject** found);
/* take_exception()'s undone: `exc` (stolen) raised again. */
void raise_exception(PyObject* exc);

#endif
