/* The recorder's timestamps: the TSC where it is stable, else CLOCK_MONOTONIC; files hold ns. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Event timestamps. Where the CPU's time-stamp counter runs at a constant rate in every
 * power state (cpuinfo flags constant_tsc and nonstop_tsc), records hold raw TSC ticks
 * (__rdtsc: about half the cost of the vDSO clock_gettime), and the flush converts them to
 * CLOCK_MONOTONIC ns with a line through two anchors, each a TSC and CLOCK_MONOTONIC read
 * together: one when the library loads (again in a forked child, whose buffers start empty),
 * one at the flush. Every event lies between the anchors, so its converted time is off by no
 * more than the anchors' own reading error (tens of ns). Elsewhere records hold
 * CLOCK_MONOTONIC ns directly. Files always hold CLOCK_MONOTONIC ns.
 * AUTONVTX_RECORDER_CLOCK=monotonic forces clock_gettime.
 */
int g_use_tsc;
uint64_t g_anchor_tsc, g_anchor_ns;

__attribute__((noinline)) uint64_t now_ns_call(void) { return now_ns(); }

/* A (TSC, CLOCK_MONOTONIC ns) pair read as close together as a few tries allow. */
void read_anchor(uint64_t* tsc, uint64_t* ns)
{
#ifdef HAVE_TSC
    uint64_t best = UINT64_MAX;
    int i;
    for (i = 0; i < 5; ++i) {
        uint64_t t0 = __rdtsc();
        uint64_t n = now_ns();
        uint64_t t1 = __rdtsc();
        if (t1 >= t0 && t1 - t0 < best) {
            best = t1 - t0;
            *tsc = t0 + (t1 - t0) / 2;
            *ns = n;
        }
    }
    if (best != UINT64_MAX)
        return;
#endif
    *tsc = 0;
    *ns = now_ns();
}

static int cpu_has_stable_tsc(void)
{
#ifdef HAVE_TSC
    char line[8192];
    int found = 0;
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) == 0) {
            /* Tokens are space-separated; the line ends with a newline. */
            found = strstr(line, " constant_tsc ") != NULL && strstr(line, " nonstop_tsc") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
#else
    return 0;
#endif
}

void choose_clock(void)
{
    const char* clock = getenv("AUTONVTX_RECORDER_CLOCK");
    g_use_tsc = !(clock && strcmp(clock, "monotonic") == 0) && cpu_has_stable_tsc();
    if (g_use_tsc)
        read_anchor(&g_anchor_tsc, &g_anchor_ns);
}

ts_convert conversion_at(uint64_t flush_tsc, uint64_t flush_ns)
{
    ts_convert c = { 0, 0, 0, 0.0 };
    if (!g_use_tsc)
        return c;
    c.on = 1;
    c.tsc0 = g_anchor_tsc;
    c.ns0 = g_anchor_ns;
    if (flush_tsc > g_anchor_tsc && flush_ns > g_anchor_ns)
        c.ns_per_tick = (double)(flush_ns - g_anchor_ns) / (double)(flush_tsc - g_anchor_tsc);
    return c;
}

uint32_t os_tid(void) { return (uint32_t)syscall(SYS_gettid); }

