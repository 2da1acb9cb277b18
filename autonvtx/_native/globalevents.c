/*
 * Where the interpreter keeps which tools each global sys.monitoring event calls: the
 * `monitors` table of PyInterpreterState, an internal structure (Include/internal/
 * pycore_interp.h). The code engine turns its own PY_UNWIND bit there on and off as its first
 * range opens and its last closes (monitoring.c): PEP 669 gives PY_UNWIND no local form, and
 * sys.monitoring.set_events re-instruments every running frame each time it is called.
 *
 * This unit alone is compiled as part of the core (Py_BUILD_CORE), for offsetof() only: it
 * calls nothing internal. It also keeps what the code engine writes into a code object's
 * monitoring data (below), CPython's other structure it relies on. ranges.py checks the table behaves as the offset says, through the
 * public set_events, before relying on it; anywhere else PY_UNWIND stays on for good.
 */
#include <patchlevel.h>
#include <pyconfig.h> /* Py_GIL_DISABLED */

/* Some distributions ship Python's headers without the internal ones: PY_UNWIND then stays on. */
#if defined(__has_include)
#if !__has_include(<internal/pycore_interp.h>)
#define AUTONVTX_NO_INTERNAL_HEADERS 1
#endif
#endif

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    !defined(AUTONVTX_NO_INTERNAL_HEADERS)
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_interp.h>
#include <stddef.h>

_Static_assert(PY_MONITORING_EVENT_PY_UNWIND == 12 && PY_MONITORING_EVENT_PY_THROW == 13,
               "monitoring.c's EVENT_PY_UNWIND and EVENT_PY_THROW");

Py_ssize_t global_events_offset(void)
{
    return (Py_ssize_t)offsetof(PyInterpreterState, monitors);
}

#include <internal/pycore_frame.h>

/* The generator or coroutine whose frame the calling thread runs (borrowed), else NULL; 1 where
 * this is known: what monitoring.c's coroutine spans are keyed by, read without making the
 * frame object PyEval_GetFrame() would (two of the inline helpers of pycore_frame.h). */
int running_generator(PyObject** generator)
{
    _PyInterpreterFrame* frame = _PyThreadState_GetFrame(PyThreadState_Get());
    *generator = frame != NULL && frame->owner == FRAME_OWNED_BY_GENERATOR ? (PyObject*)_PyFrame_GetGenerator(frame)
                                                                            : NULL;
    return 1;
}

#else

#include <Python.h>

Py_ssize_t global_events_offset(void)
{
    return -1;
}

int running_generator(PyObject** generator)
{
    *generator = NULL;
    return 0;
}

#endif

/* ---- a code's monitoring data (3.12, 3.13 with the GIL) ----
 *
 * The code engine's walk allocates it as CPython would, turns the code's local events on in
 * it, and keeps a function's pending style in room CPython leaves unread (monitoring.c reads
 * it back at the code's first run). Only the public header's fields (cpython/code.h). */
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#include <stdint.h>
#include <string.h>

/* monitoring.c: the table of pending styles, and a code's range as its code extra. */
Py_ssize_t monitoring_style_number(PyObject* style);
PyObject* monitoring_style_at(Py_ssize_t number);
int monitoring_attach(PyObject* code, PyObject* range);
int monitoring_turn_on_pending(PyCodeObject* code, int tool_id, unsigned long events, PyObject* style);

/* The code's monitoring data, allocated as CPython allocates it, plus room for a pending
 * style where the allocator's rounding leaves it: pymalloc hands out multiples of 16 bytes,
 * and 3.12's 72-byte _PyCoMonitoringData sits in an 80-byte block whose last 8 bytes nothing
 * reads. A pending code then needs no code extra (a 16-byte block of its own, and
 * PyUnstable_Code_SetExtra's realloc), only the block CPython would allocate anyway. */
#define DATA_SIZE sizeof(_PyCoMonitoringData)
#define DATA_BLOCK ((DATA_SIZE + 15) & ~(size_t)15)
#define STYLE_IN_DATA (DATA_BLOCK - DATA_SIZE >= sizeof(void*))
/* 3.13's is 64 bytes, a block of its own, but its two 10-byte event tables leave 4 bytes
 * before the pointer `tools` (Include/cpython/code.h: local_monitors, active_monitors, then
 * tools): there the style's number in monitoring.c's table of styles, its complement as a
 * check. CPython 3.13 reaches the data only through its named members (Python/instrumentation.c:
 * allocate_instrumentation_data sets each one, and only for data it allocates itself;
 * update_instrumentation_data and set_local_events store the two tables, 10 bytes each, and
 * the pointers; code_dealloc frees the pointers and the block), never copying the whole
 * struct; and ranges.py checks once per process, on a code of its own, that the 4 bytes come
 * through the code's first run (gap_probe), else the code extra holds the style. */
#define GAP_OFFSET (offsetof(_PyCoMonitoringData, active_monitors) + sizeof(_Py_LocalMonitors))
#define GAP_ROOM (offsetof(_PyCoMonitoringData, tools) - GAP_OFFSET)
#define STYLE_IN_GAP (!STYLE_IN_DATA && GAP_ROOM >= 2 * sizeof(uint16_t))
static int gap_works; /* gap_probe saw the gap come through a first run (else styles in extras) */
#define EVENT_PY_START 0
/* The tool bit the walk last turned events on for: a code whose PY_START has it and no code
 * extra is one whose monitoring data this module allocated, a pending style in it. */
static uint8_t pending_bit;

/* Write and read the style's number (1-based, at most 65,535 styles) in the gap. */
static int gap_put(_PyCoMonitoringData* data, PyObject* style)
{
    Py_ssize_t i = monitoring_style_number(style);
    uint16_t number[2];
    if (i == 0 || i > 0xFFFF)
        return 0;
    number[0] = (uint16_t)i;
    number[1] = (uint16_t)~number[0];
    memcpy((char*)data + GAP_OFFSET, number, sizeof number);
    return 1;
}

static PyObject* gap_get(_PyCoMonitoringData* data)
{
    uint16_t number[2];
    memcpy(number, (char*)data + GAP_OFFSET, sizeof number);
    if ((uint16_t)(number[0] ^ number[1]) != 0xFFFF)
        return NULL;
    return monitoring_style_at(number[0]);
}

/* The pending style a code's monitoring data points at (borrowed: the styles live as long
 * as the process), else NULL. */
PyObject* monitoring_pending_in_data(PyCodeObject* code)
{
    if (STYLE_IN_DATA || STYLE_IN_GAP) {
        _PyCoMonitoringData* data = code->_co_monitoring;
        void* style;
        if (data == NULL || pending_bit == 0 || !(data->local_monitors.tools[EVENT_PY_START] & pending_bit))
            return NULL;
        if (!STYLE_IN_DATA)
            return gap_get(data);
        memcpy(&style, (char*)data + DATA_SIZE, sizeof style);
        return monitoring_style_number(style) ? (PyObject*)style : NULL;
    }
    return NULL;
}

/* sys.monitoring.set_local_events(tool_id, code, events) for a code object that has none of
 * this tool's yet, as CPython's _PyMonitoring_SetLocalEvents does it (Python/instrumentation.c,
 * 3.12 and 3.13: the code's monitoring data allocated, its local events set) but for the last
 * step: rather than re-instrumenting the bytecode now (_Py_Instrument's pass over every
 * instruction), the code is marked out of date, as CPython marks every code object when a
 * global set_events changes what is monitored, and RESUME, the first instruction of every run
 * of a code object and of every resumption of a generator, instruments it before it runs.
 * Same events, same order; a function never called (most of a package targeted wholesale)
 * no longer pays for its instrumentation: _Py_Instrument was about 3,000 of the 26,000
 * instructions per function of numpy + pandas walked by the code engine (3.12).
 * 1: done; 0: the caller calls set_local_events (turned off, or the code has events of this
 * tool already: CPython then decides). The fields used are in CPython's public header
 * (cpython/code.h); ranges.py checks the result with get_local_events once per process. */
static int lazy_events_off;

/* A version the interpreter's never equals, so the code is instrumented at its next RESUME:
 * 3.12 forces an update with UINT64_MAX itself; 3.13 keeps its event bits in the low byte, zero
 * in a code's version. */
static void force_instrumenting(PyCodeObject* code)
{
#if PY_VERSION_HEX >= 0x030D0000
    code->_co_instrumentation_version = ~(uintptr_t)0xFF;
#else
    code->_co_instrumentation_version = UINT64_MAX;
#endif
}

int monitoring_turn_on_later(PyCodeObject* code, int tool_id, unsigned long events)
{
    return monitoring_turn_on_pending(code, tool_id, events, NULL);
}

int monitoring_turn_on_pending(PyCodeObject* code, int tool_id, unsigned long events, PyObject* style)
{
    _PyCoMonitoringData* data = code->_co_monitoring;
    uint8_t bit = (uint8_t)(1u << tool_id);
    int e;

    if (lazy_events_off || tool_id < 0 || tool_id > 7 || events >= (1u << _PY_MONITORING_LOCAL_EVENTS))
        return 0;
    if (data == NULL) {
        /* CPython frees it with PyMem_Free, whatever its size. */
        data = PyMem_Malloc(style != NULL && STYLE_IN_DATA ? DATA_BLOCK : DATA_SIZE);
        if (data == NULL)
            return 0;
        memset(data, 0, sizeof *data);
        if (style != NULL && STYLE_IN_DATA) {
            memcpy((char*)data + DATA_SIZE, &style, sizeof style);
            pending_bit = bit;
            style = NULL; /* placed */
        }
        else if (style != NULL && STYLE_IN_GAP && gap_works && gap_put(data, style)) {
            pending_bit = bit;
            style = NULL; /* placed */
        }
        code->_co_monitoring = data;
    }
    else {
        for (e = 0; e < _PY_MONITORING_LOCAL_EVENTS; e++)
            if (data->local_monitors.tools[e] & bit)
                return 0;
    }
    /* Where the data was there before (the code ran): the code extra holds the style. */
    if (style != NULL && monitoring_attach((PyObject*)code, Py_NewRef(style)) < 0)
        return -1;
    for (e = 0; events != 0; e++, events >>= 1)
        if (events & 1)
            data->local_monitors.tools[e] |= bit;
    force_instrumenting(code);
    return 1;
}

void monitoring_lazy(int on)
{
    lazy_events_off = !on;
}

/* The probe behind monitoring.c's gap_probe(code, stage): 1 where there is no gap to use. */
int monitoring_gap_probe(PyCodeObject* code, int stage)
{
    static const uint16_t mark[2] = {0x5A17, (uint16_t)~0x5A17};
    _PyCoMonitoringData* data = code->_co_monitoring;
    uint16_t seen[2];
    if (!STYLE_IN_GAP)
        return 1;
    if (stage == 0) {
        if (data != NULL || (data = PyMem_Malloc(DATA_SIZE)) == NULL)
            return 0;
        memset(data, 0, sizeof *data);
        memcpy((char*)data + GAP_OFFSET, mark, sizeof mark);
        code->_co_monitoring = data;
        force_instrumenting(code);
        return 1;
    }
    if (data != NULL) {
        memcpy(seen, (char*)data + GAP_OFFSET, sizeof seen);
        gap_works = memcmp(seen, mark, sizeof seen) == 0;
    }
    return gap_works;
}

#elif PY_VERSION_HEX >= 0x030C0000

int monitoring_turn_on_later(PyCodeObject* code, int tool_id, unsigned long events)
{
    (void)code;
    (void)tool_id;
    (void)events;
    return 0;
}

int monitoring_turn_on_pending(PyCodeObject* code, int tool_id, unsigned long events, PyObject* style)
{
    (void)style;
    return monitoring_turn_on_later(code, tool_id, events);
}

PyObject* monitoring_pending_in_data(PyCodeObject* code)
{
    (void)code;
    return NULL;
}

void monitoring_lazy(int on)
{
    (void)on;
}

int monitoring_gap_probe(PyCodeObject* code, int stage)
{
    (void)code;
    (void)stage;
    return 1;
}

#endif
