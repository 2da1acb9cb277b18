/*
 * --flight under another NVTX tool (Nsight Systems): the recorder is not attached there, so the
 * slow instances of the watched range are found in the process itself, where that range begins
 * and ends. Only the watched range is timed: a Range whose name matches when it is made gets
 * `flight` set and keeps `measure_left` up, so the per-call paths that already time a range for
 * --budget (range.h's range_enter/range_leave, the code engine's shadow stack, coroutines,
 * spans) time each of its instances and hand them here through budget_account(); a region
 * (regions.c) times the iterations of a Region made for the watched template. Every other range
 * runs the same code as without --flight.
 *
 * An instance longer than FACTOR times the median of those before it (after a warm-up) opens
 * the capture range, NVTX's "capture" in domain "autonvtx" (the one regions' capture windows
 * open: `autonvtx profile` names it to nsys with --capture-range-end=repeat), and leaves a mark
 * in it saying which instance, how slow, against which median; the range ends after the next
 * KEEP instances, so nsys records them with their GPU work. The instances in a window are
 * neither compared nor counted. At most MAX windows are opened in a process.
 *
 * Everything here runs with the GIL held (the callers are wrappers and sys.monitoring callbacks).
 */
#include "nvtxclient.h"
#include "../recorder/_native/numbers.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEDIAN_OF 1000u /* as the recorder's flight.c: the median of the last 1,000 instances */

static int armed;
static char* pattern; /* the range's name folded: numbers and {placeholders} written "{n}" */
static char* shown;   /* as the user gave it */
static double factor = 3.0;
static long keep = 10, max_windows = 20, warmup = 5;

static unsigned long long instances, slow, unsaid;
static unsigned long long arrivals[MEDIAN_OF], sorted[MEDIAN_OF];
static unsigned measured, arrival_pos;

static long windows, window_left;
static nvtxRangeId_t window_id;
static int window_open;

/* ---- names ---- */

/* `text` with its numbers and its {placeholders} (a region's template) written "{n}"; NULL when
 * out of memory. */
static char* folded(const char* text)
{
    const unsigned char* s = (const unsigned char*)text;
    size_t n = strlen(text), i = 0, k = 0;
    char* out = malloc(3 * n + 1);
    if (out == NULL)
        return NULL;
    while (i < n) {
        const char* close = s[i] == '{' ? strchr(text + i + 1, '}') : NULL;
        size_t end = number_end(s, n, i);
        if (close != NULL && memchr(text + i + 1, '{', (size_t)(close - text - i - 1)) == NULL) {
            memcpy(out + k, "{n}", 3);
            k += 3;
            i = (size_t)(close - text) + 1;
        } else if (end > i) {
            memcpy(out + k, "{n}", 3);
            k += 3;
            i = end;
        } else {
            out[k++] = text[i++];
        }
    }
    out[k] = '\0';
    return out;
}

int flight_matches(const char* domain, const char* message)
{
    char* name;
    size_t d;
    int yes;
    if (!armed || message == NULL)
        return 0;
    if ((name = folded(message)) == NULL)
        return 0;
    yes = strcmp(name, pattern) == 0;
    /* "domain:name", as the summary shows it (`autonvtx:train.step`). */
    d = domain != NULL ? strlen(domain) : 0;
    if (!yes && d > 0 && strncmp(pattern, domain, d) == 0 && pattern[d] == ':')
        yes = strcmp(name, pattern + d + 1) == 0;
    free(name);
    return yes;
}

/* ---- the instances ---- */

static unsigned long long median(void)
{
    if (measured == 0)
        return 0;
    if (measured % 2)
        return sorted[measured / 2];
    return (sorted[measured / 2 - 1] + sorted[measured / 2]) / 2;
}

static unsigned sorted_position(unsigned long long value)
{
    unsigned lo = 0, hi = measured;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (sorted[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void measure(unsigned long long duration)
{
    unsigned at;
    if (measured == MEDIAN_OF) { /* the oldest leaves the median */
        at = sorted_position(arrivals[arrival_pos]);
        memmove(sorted + at, sorted + at + 1, (measured - at - 1) * sizeof sorted[0]);
        measured--;
    }
    at = sorted_position(duration);
    memmove(sorted + at + 1, sorted + at, (measured - at) * sizeof sorted[0]);
    sorted[at] = duration;
    measured++;
    arrivals[arrival_pos] = duration;
    arrival_pos = (arrival_pos + 1) % MEDIAN_OF;
}

/* The capture range, asked of the tool each time (a trigger is rare; a fork child's tool may be
 * a new one): registered, as nsys --capture-range=nvtx matches registered strings unless
 * NSYS_NVTX_PROFILER_REGISTER_ONLY=0. */
static nvtxDomainHandle_t capture_domain(nvtxEventAttributes_t* attributes)
{
    nvtxDomainHandle_t domain = nvtxDomainCreateA("autonvtx");
    memset(attributes, 0, sizeof *attributes);
    attributes->version = NVTX_VERSION;
    attributes->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes->colorType = NVTX_COLOR_ARGB;
    attributes->color = 0xFFE53935u;
    if (domain != NULL) {
        attributes->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attributes->message.registered = nvtxDomainRegisterStringA(domain, "capture");
    }
    return domain;
}

static void close_window(void)
{
    nvtxEventAttributes_t attributes;
    nvtxDomainHandle_t domain;
    if (!window_open)
        return;
    domain = capture_domain(&attributes);
    if (domain != NULL)
        nvtxDomainRangeEnd(domain, window_id);
    window_open = 0;
    window_left = 0;
}

static void format_ns(char* out, size_t size, double ns)
{
    if (ns >= 1e9)
        snprintf(out, size, "%.3f s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(out, size, "%.2f ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(out, size, "%.2f us", ns / 1e3);
    else
        snprintf(out, size, "%.0f ns", ns);
}

/* A slow instance: a window opened, its mark, and a line on stderr. */
static void trigger(const char* name, unsigned long long ordinal, unsigned long long duration,
                    unsigned long long m, unsigned of)
{
    nvtxEventAttributes_t attributes;
    nvtxDomainHandle_t domain;
    char text[768], took[32], med[32];

    slow++;
    if (windows >= max_windows) {
        if (unsaid++ == 0) {
            fprintf(stderr, "autonvtx: flight: --flight-max %ld windows opened: later slow instances of '%s' are"
                            " counted, not captured\n", max_windows, shown);
            fflush(stderr);
        }
        return;
    }
    domain = capture_domain(&attributes);
    if (domain != NULL)
        window_id = nvtxDomainRangeStartEx(domain, &attributes);
    window_open = 1;
    windows++;
    window_left = keep;
    format_ns(took, sizeof took, (double)duration);
    format_ns(med, sizeof med, (double)m);
    /* The mark goes inside the capture range, so the export of the window holds it; `autonvtx
     * report` reads it back (report.nsys.flightmarks). */
    snprintf(text, sizeof text,
             "autonvtx --flight: window %ld: '%s' (instance %llu of '%s') took %s, %.1fx the median %s of the"
             " %u before it",
             windows, name != NULL ? name : "?", ordinal, shown, took, m > 0 ? (double)duration / (double)m : 0.0,
             med, of);
    domain = capture_domain(&attributes);
    if (domain != NULL) {
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = text;
        nvtxDomainMarkEx(domain, &attributes);
    }
    /* No Python code runs here (this may be a sys.monitoring callback): C stdio. */
    fprintf(stderr, "autonvtx: flight: '%s' (instance %llu of '%s') took %s, %.1fx the median %s of the %u before it;"
                    " capture window %ld opened over the next %ld instances\n",
            name != NULL ? name : "?", ordinal, shown, took, m > 0 ? (double)duration / (double)m : 0.0, med, of,
            windows, keep);
    fflush(stderr);
}

void flight_instance(const char* name, unsigned long long duration)
{
    unsigned long long ordinal;
    if (!armed)
        return;
    ordinal = ++instances;
    if (window_open) {
        /* A captured instance is neither compared nor counted: starting a collection stalls the
         * program (nsys 2022.4 here: the first instance after it took 4x the median). */
        if (--window_left <= 0)
            close_window();
        return;
    }
    if ((long long)ordinal > (long long)warmup) {
        unsigned long long m = median();
        unsigned enough = warmup > 0 ? (unsigned)(warmup < (long)MEDIAN_OF ? warmup : (long)MEDIAN_OF) : 1u;
        if (measured >= enough && (double)duration > factor * (double)m)
            trigger(name, ordinal, duration, m, measured);
        measure(duration);
    }
}

/* A fork child watches its own instances: a window its parent had open is not its own
 * (pthread_atfork's child handler). */
static void flight_forked(void)
{
    window_open = 0;
    window_left = 0;
    instances = slow = unsaid = 0;
    measured = arrival_pos = 0;
    windows = 0;
}

/* ---- Python ---- */

PyDoc_STRVAR(watch_flight_doc,
"watch_flight(range, factor, keep, max, warmup, /)\n--\n\n"
"From now on every Range (and Region) named `range` is timed at each instance, and one lasting\n"
"more than `factor` times the median of those before it (after `warmup`) opens the capture\n"
"range for the next `keep` instances, at most `max` times. Ranges already made are looked at too.");

static PyObject* watch_flight(PyObject* module, PyObject* args)
{
    const char* range;
    double f;
    long k, m, w;
    char* p;
    char* s;
    (void)module;
    if (!PyArg_ParseTuple(args, "sdlll:watch_flight", &range, &f, &k, &m, &w))
        return NULL;
    if (!(f > 1.0) || k < 1 || m < 1 || w < 0) {
        PyErr_SetString(PyExc_ValueError, "watch_flight: factor > 1, keep >= 1, max >= 1, warmup >= 0");
        return NULL;
    }
    p = folded(range);
    s = strdup(range);
    if (p == NULL || s == NULL) {
        free(p);
        free(s);
        return PyErr_NoMemory();
    }
    free(pattern);
    free(shown);
    pattern = p;
    shown = s;
    factor = f;
    keep = k;
    max_windows = m;
    warmup = w;
    armed = 1;
    if (range_flag_flight() < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(flight_watched_doc,
"flight_watched()\n--\n\n"
"{'instances', 'slow', 'windows', 'open', 'uncaptured'}: what the watch saw in this process.");

static PyObject* flight_watched(PyObject* module, PyObject* unused)
{
    (void)module;
    (void)unused;
    return Py_BuildValue("{sKsKslsisK}", "instances", instances, "slow", slow, "windows", windows, "open",
                         window_open, "uncaptured", unsaid);
}

PyDoc_STRVAR(close_flight_doc,
"close_flight()\n--\n\n"
"End the capture range if a window is open (at exit, or when the watch is taken off), and stop\n"
"watching.");

static PyObject* close_flight(PyObject* module, PyObject* unused)
{
    (void)module;
    (void)unused;
    close_window();
    armed = 0;
    Py_RETURN_NONE;
}

static PyMethodDef flight_functions[] = {
    {"watch_flight", watch_flight, METH_VARARGS, watch_flight_doc},
    {"flight_watched", flight_watched, METH_NOARGS, flight_watched_doc},
    {"close_flight", close_flight, METH_NOARGS, close_flight_doc},
    {NULL, NULL, 0, NULL},
};

int flightwatch_add_to_module(PyObject* module)
{
    static int registered;
    if (!registered && pthread_atfork(NULL, NULL, flight_forked) == 0)
        registered = 1;
    return PyModule_AddFunctions(module, flight_functions);
}

int flight_is_armed(void)
{
    return armed;
}
