/*
 * The flight recorder's own declarations, shared by flight.c (settings, the scan, the instances)
 * and flight_window.c (writing a window). Everything here runs under g_lock, on the spiller.
 */
#ifndef AUTONVTX_FLIGHT_H
#define AUTONVTX_FLIGHT_H

#include "recorder.h"

#define MAX_KEEP 1000u
#define NAME_MAX_BYTES 200u
#define MAX_NAMED_ENCLOSING 32u

typedef struct open_range {
    uint32_t domain;
    uint32_t watched;
    uint64_t ts;
    char* name;             /* a watched instance's name (malloc'ed) */
    const char* record;     /* the push (valid while the ring holds it: ts >= the thread's oldest) */
} open_range;

struct flight_thread {
    open_range* stack;
    uint32_t len, cap;
};

/* A slow instance seen by the scan, to be written after the spill (flight_after_spill). */
typedef struct trigger {
    uint64_t ordinal, start, end, window_start, median, measured;
    uint32_t in_window;     /* instances of the window (KEEP + 1 unless fewer came before) */
    thread_buffer* thread;
    char name[NAME_MAX_BYTES + 1];
} trigger;

typedef struct span_ts { uint64_t start, end; } span_ts; /* an instance's start and end (raw) */

/* Calls visit(record, size, arg) for each record from (first, from) up to (last, last_used), or
   until it returns 0. */
typedef int (*record_visitor)(const char* p, size_t size, void* arg);

#pragma GCC visibility push(hidden)

/* flight.c: the settings and what the scan keeps */
extern char* g_shown_range;
extern double g_factor;
extern uint32_t g_keep, g_max_files, g_warmup;
extern uint64_t g_ring_bytes;
extern char g_out_head[4096], g_out_tail[64];
extern span_ts g_last[MAX_KEEP + 1];
extern uint32_t g_last_pos, g_last_len;
extern uint64_t g_unwritten_triggers;
extern int g_said_max;

void walk(chunk* first, size_t from, chunk* last, size_t last_used, record_visitor visit, void* arg);
char* record_name(const char* p);
uint64_t record_ts(const char* p);
uint64_t record_id(const char* p);
double ns_per_tick(void);

/* flight_window.c */
void write_window(const trigger* t);
void trim_ring(void);

#pragma GCC visibility pop

#endif
