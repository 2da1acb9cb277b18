/*
 * The exporter's internal header: the state its units share. The exporter reads the recorder's
 * per-process files (the .anr format, defined in anr_format.h) and streams them into Chrome
 * trace-event JSON, Perfetto TracePackets and range statistics, in one pass per file. One unit
 * per job: export.c (the ctypes face, growable bytes, interning), export_read.c (sections,
 * records, registries, capture windows), export_pair.c (pushes with pops, starts with ends),
 * export_json.c, export_perfetto.c and export_stats.c.
 */
#ifndef AUTONVTX_EXPORT_H
#define AUTONVTX_EXPORT_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anr_format.h"
#include "numbers.h"

#define EXPORT __attribute__((visibility("default")))
#define NONE32 0xFFFFFFFFu

/* STATS_NUMBERS: names that differ only in their numbers share a row (`step 3` -> `step {n}`). */
enum { STATS_FLAT = 1, STATS_TREE = 2, STATS_BY_THREAD = 4, STATS_CLASS = 8, STATS_NUMBERS = 16 };

/* ---- growable bytes ---- */

typedef struct buf {
    char* p;
    size_t len, cap;
    int failed;
} buf;

int buf_grow(buf* b, size_t n);
void buf_str(buf* b, const char* s);
void buf_u64(buf* b, uint64_t v);
void buf_us(buf* b, uint64_t ns);

/* Inlined: most callers pass a constant length, which the compiler turns into plain stores. */
static inline __attribute__((always_inline)) void buf_add(buf* b, const void* p, size_t n)
{
    if (__builtin_expect(b->len + n > b->cap, 0) && !buf_grow(b, n))
        return;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* ---- interning: (domain, text) -> dense id ---- */

typedef struct name {
    uint32_t domain;
    uint32_t len;
    uint64_t hash;
    char* text; /* NUL-terminated copy */
    char* json; /* its JSON string literal, made on first use */
    size_t json_len;
} name;

typedef struct interner {
    name* items;
    size_t count, cap;
    uint32_t* slots; /* id + 1, 0 = empty */
    size_t nslots;
} interner;

/* ---- statistics rows: (group, parent row, name) -> durations ---- */

typedef struct row {
    uint64_t group;
    int64_t parent; /* tree mode: the enclosing range's row, else -1 */
    uint32_t name;  /* id in the names interner (its domain is the global domain id) */
    uint32_t depth;
    /* total: the time inside the row's outermost instances, nested instances of the same row
       counted once (recursion); sum: every instance's duration, for mean and deviation */
    uint64_t count, total, sum, self, min, max, open, seen;
    long double sumsq;
    uint64_t* durations;
    size_t dcap;
} row;

typedef struct group_span {
    uint64_t group, first, last;
} group_span;

typedef struct stats {
    row* rows;
    size_t count, cap;
    uint32_t* slots;
    size_t nslots;
    group_span* groups;
    size_t ngroups;
    uint32_t* numbered; /* STATS_NUMBERS: name id -> the id of its name with numbers as {n} */
    size_t numbered_cap;
} stats;

/* ---- an open-addressing map: 64-bit key -> 32-bit value ---- */

typedef struct u64map {
    uint64_t* keys;
    uint32_t* values; /* NONE32: an empty slot */
    size_t count, nslots;
} u64map;

uint32_t u64map_get(const u64map* m, uint64_t key); /* NONE32 when absent */
int u64map_put(u64map* m, uint64_t key, uint32_t value); /* value != NONE32; 0 when out of memory */
void u64map_free(u64map* m);

/* ---- per-file state ---- */

typedef struct opened {
    uint64_t start, payload, child;
    int64_t row;        /* tree mode: this range's row */
    uint32_t domain;    /* the file's domain id */
    uint32_t name;      /* global name id */
    uint32_t category;  /* global category id, or NONE32 */
    uint32_t color;
    uint8_t has_color, payload_type;
    uint8_t outside;    /* begins outside the file's capture windows: not exported */
    uint8_t closed;     /* popped while a range of another domain stayed above it */
    uint8_t warm;       /* statistics: among its row's first --skip-first instances, not counted */
    uint32_t below;     /* 1 + stack index of the open range of its domain below it, 0: none */
} opened;

typedef struct thread_state {
    uint32_t index, tid, seq;
    opened* stack;
    size_t depth, cap;
    uint64_t first, last;
    uint64_t span_first, span_last; /* statistics: the instances counted on this thread */
    u64map tops;           /* file domain id -> 1 + stack index of its innermost open range */
    uint32_t hot_domain, hot_top; /* the last domain pushed or popped, whose entry lives here */
    int has_hot;
    uint8_t* seen_names;   /* Perfetto: interned on this thread's sequence */
    size_t seen_names_cap;
    uint8_t* seen_cats;
    size_t seen_cats_cap;
    u64map instances;      /* --skip-first: (parent row, name) -> instances met on this thread */
    u64map open_rows;      /* statistics: row -> its counted push/pop instances open on this thread */
    int wrapped;
    uint64_t unmatched;
} thread_state;

typedef struct started {
    struct started* next;
    uint64_t id;
    uint32_t tid, index;
    opened range;
} started;

#define START_BUCKETS 4096u

typedef struct exporter {
    FILE* json;
    FILE* pftrace;
    buf out, packet, event, scratch;
    interner names;      /* (global domain id, text) */
    interner domains;    /* domain names */
    interner categories; /* (global domain id, text) */
    stats st;
    uint32_t* folded;      /* STATS_CLASS: name id -> the id of its class's name */
    size_t folded_cap;
    int stats_mode;
    uint64_t skip_first;
    uint64_t async_id;
    uint32_t next_seq;
    /* the file being read */
    const char* data;
    size_t size;
    uint32_t pid;
    uint64_t group;
    uint64_t flush_ns;
    int ended_normally;
    uint32_t* domain_map;  /* file domain id -> global domain id */
    size_t domain_map_cap;
    uint32_t* string_map;  /* file string id -> global name id */
    size_t string_map_cap;
    thread_state* threads;
    size_t nthreads;
    u64map thread_at;      /* the recorder's thread index -> position in threads */
    u64map cats;           /* (file domain id, number) -> global category id, the last named */
    started* starts[START_BUCKETS];
    uint64_t info[8];
    /* Capture windows (regions' `capture`, the start/end ranges capture@autonvtx) of the file
       being read: only events that begin inside one are exported. */
    uint64_t (*windows)[2];
    size_t nwindows, windows_cap;
    uint64_t outside; /* events of the file left out */
    /* What a damaged file lost: records where a section stopped being readable (the rest of
       that section is skipped), the bytes skipped, and registry entries rejected. */
    uint64_t corrupt_records, skipped_bytes, bad_entries;
    /* Records with a time no recorder writes (before the thread's previous one, or past the
       file's last write by more than TIME_SLACK_NS): left out, each alone. */
    uint64_t impossible_times;
    uint64_t latest_write_ns; /* the latest SPILL's time (0: none): no event is later */
    /* A last write the process's end cut short: its whole records are read (and counted here),
       the bytes it did not reach, and the record or entry the cut went through, are lost. */
    int cut_write;
    uint64_t cut_kept_events, cut_lost_bytes;
} exporter;

/* How far past the file's last recorded write an event may lie: a process that died before
   writing its last SPILL section has events after the previous one (seconds apart). */
#define TIME_SLACK_NS (3600ull * 1000000000ull)

enum { I_RANGES, I_MARKS, I_OPEN, I_UNMATCHED, I_FIRST, I_LAST, I_FLUSH, I_ENDED };

/* The ctypes face (autonvtx/recorder/export.py declares the same signatures). */
EXPORT void* autonvtx_export_new(const char* json_path, const char* pftrace_path, int stats_mode,
                                 uint64_t skip_first);
EXPORT int autonvtx_export_file(void* handle, const char* path, uint64_t group, uint64_t info[8]);
EXPORT uint64_t autonvtx_export_outside(void* handle);
EXPORT uint64_t autonvtx_export_damage(void* handle, uint64_t out[6]);
EXPORT int autonvtx_export_close(void* handle);
EXPORT void autonvtx_export_free(void* handle);
EXPORT size_t autonvtx_export_rows(void* handle);
EXPORT void autonvtx_export_row(void* handle, size_t i, uint64_t out[12], double fout[3]);
EXPORT const char* autonvtx_export_text(void* handle, uint32_t id, int which);
EXPORT size_t autonvtx_export_group_spans(void* handle, size_t i, uint64_t out[3]);

/* export.c */
uint32_t intern(interner* t, uint32_t domain, const char* s, size_t n);
void interner_free(interner* t);
void flush_out(exporter* x, int force);
int grow_map(uint32_t** map, size_t* cap, size_t need);

static inline uint32_t global_domain(const exporter* x, uint32_t id)
{
    return id < x->domain_map_cap && x->domain_map[id] != NONE32 ? x->domain_map[id] : 0;
}

static inline uint32_t load32(const char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t load64(const char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t thread_uuid(uint32_t pid, uint32_t tid) { return (uint64_t)pid << 32 | tid; }

/* export_read.c */
void find_windows(exporter* x);
void read_sections(exporter* x);

/* export_pair.c */
thread_state* thread_of(exporter* x, uint32_t index, uint32_t tid, uint32_t flags);
void pair_event(exporter* x, thread_state* t, uint8_t kind, opened* o, uint64_t id);
void close_open(exporter* x);

/* export_json.c */
void color_text(char out[8], uint32_t color);
void json_range(exporter* x, uint32_t tid, const opened* o, uint64_t end, int is_open);
void json_mark(exporter* x, uint32_t tid, const opened* o);
void json_async(exporter* x, uint32_t tid, uint32_t end_tid, const opened* o, uint64_t end, int is_open);

/* export_perfetto.c */
enum { SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3 };
void pf_event(exporter* x, thread_state* t, int type, uint64_t ts, uint64_t track, const opened* o, int is_open);
void pf_async(exporter* x, thread_state* t, const opened* o, uint64_t end, int is_open);

/* export_stats.c */
int64_t stats_row(stats* s, uint64_t group, int64_t parent, uint32_t name, uint32_t depth);
void stats_span(stats* s, uint64_t group, uint64_t first, uint64_t last);
uint32_t stat_name(exporter* x, uint32_t id);
uint32_t numbered_name(exporter* x, uint32_t id);
uint64_t stats_group(const exporter* x, const thread_state* t);
int is_warm_up(exporter* x, thread_state* t, int64_t r, uint32_t name);
void count_instance(exporter* x, thread_state* t, int64_t r, uint64_t start, uint64_t end,
                   uint64_t self, int is_open, int outermost);
void stats_free(stats* s);

#endif
