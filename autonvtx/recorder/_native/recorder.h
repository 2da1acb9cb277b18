/*
 * The native recorder's own declarations, shared by its C files (not the .anr format, which is
 * anr_format.h). Everything here has hidden visibility: the library exports only
 * InitializeInjectionNvtx2 and the autonvtx_recorder_* control functions (EXPORT).
 *
 *   recorder.c  loading, configuration, fork, the injection entry point, the control API
 *   events.c    the recording callbacks: per-thread buffers' hot paths, whole-range dropping
 *   buffers.c   chunks and the memory budget
 *   registry.c  domains, registered strings, categories, thread names
 *   clock.c     timestamps (TSC or CLOCK_MONOTONIC) and their conversion
 *   spill.c     the spiller thread and writing the recording files
 *   flight.c    the flight recorder: slow instances of one range, and the window around each
 */
#ifndef AUTONVTX_RECORDER_H
#define AUTONVTX_RECORDER_H

#include <nvtx3/nvToolsExt.h>

#include "anr_format.h"
#include "numbers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define CHUNK_BYTES (128u * 1024u)  /* a thread's first chunk (and any the budget allows only so small) */
#define BIG_CHUNK_MAP (2u * 1024u * 1024u) /* later chunks: one transparent huge page each */
#define MAX_MESSAGE (64u * 1024u)
#define NAME_BYTES 64


typedef struct chunk {
    _Atomic(struct chunk*) next;
    _Atomic size_t used; /* committed bytes, published with release */
    size_t cap;
    uint64_t events;     /* events it holds, set by its owner when it gets a successor */
    int closing_only;    /* taken past the budget for pops and ends only (see reserve_slow) */
    char data[];
} chunk;

typedef struct owed_pop {
    uint32_t domain;
    uint32_t count;
} owed_pop;

typedef struct thread_buffer {
    struct thread_buffer* next; /* global list, under g_lock */
    uint32_t tid;
    uint32_t index;
    char name[NAME_BYTES];
    _Atomic(chunk*) head;
    chunk* tail;        /* owner only */
    size_t tail_used;   /* owner's copy of tail->used */
    size_t limit;       /* owner: what the inline paths may fill the tail up to; 0 sends them to
                           the slow path (no tail, a closing-only tail, pushes being left out) */
    uint64_t next_seq;  /* start/end ids: index << 40 | seq */
    int depth;          /* push/pop nesting level returned to NVTX */
    owed_pop* owed;     /* owner: per domain, pops to leave out (their pushes were left out) */
    uint32_t owed_len, owed_cap;
    uint64_t owed_total;
    int full;           /* the budget refused a chunk: drop from now on */
    int wrapped;        /* keep-last mode recycled its oldest chunk at least once */
    uint64_t tail_events_base; /* owner: b->events when the tail chunk was started */
    _Atomic uint64_t events;
    _Atomic uint64_t dropped;
    _Atomic uint64_t discarded; /* events of recycled chunks (keep-last mode) */
    chunk* spill_chunk;  /* under g_lock: the live spill file has everything before */
    size_t spill_off;    /*   (spill_chunk, spill_off); NULL: nothing spilled yet */
    chunk* written_chunk; /* under g_lock: where the spill being written ends, until it is */
    size_t written_used;  /*   on disk (release_written) */
    struct flight_thread* flight; /* under g_lock: the flight scanner's view of the thread (flight.c) */
} thread_buffer;

typedef struct domain_entry { /* what an nvtxDomainHandle_t points to */
    struct domain_entry* next;
    struct domain_entry* hnext;       /* hash chain of the name index (registry.c) */
    uint32_t id;
    char* name;
} domain_entry;

typedef struct string_entry { /* what an nvtxStringHandle_t points to */
    struct string_entry* next;        /* hash chain */
    struct string_entry* next_in_order;
    uint32_t id;
    uint32_t domain;
    uint32_t len;
    char* text;
} string_entry;

typedef struct named_entry { /* categories and thread names */
    struct named_entry* next;
    uint32_t a, b;
    char* name;
} named_entry;

typedef struct slot { int module; unsigned int id; NvtxFunctionPointer record; NvtxFunctionPointer noop; } slot;
#define FP(f) ((NvtxFunctionPointer)(f))
#define CORE(name, r, n) { NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_##name, FP(r), FP(n) }
#define CORE2(name, r, n) { NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_##name, FP(r), FP(n) }

#pragma GCC visibility push(hidden)

/* recorder.c: the process's state */
extern pthread_mutex_t g_lock;
extern thread_buffer* g_threads;         /* under g_lock */
extern uint32_t g_thread_index;          /* under g_lock */
extern _Atomic int g_attached;
extern _Atomic int g_flushed;
extern pid_t g_pid;
extern int g_keep_last;                  /* AUTONVTX_RECORD_KEEP=last: a ring of chunks per thread */
extern char g_record_dir[4096];          /* AUTONVTX_RECORD_DIR when the library loaded, or "" */

/* clock.c */
extern int g_use_tsc;
extern uint64_t g_anchor_tsc, g_anchor_ns;
uint64_t now_ns(void);
__attribute__((noinline)) uint64_t now_ns_call(void);
void read_anchor(uint64_t* tsc, uint64_t* ns);
void choose_clock(void);
uint32_t os_tid(void);

static inline uint64_t now_ts(void)
{
#ifdef HAVE_TSC
    if (LIKELY(g_use_tsc))
        return __rdtsc();
#endif
    return now_ns_call();
}

/* Converts recorded timestamps to CLOCK_MONOTONIC ns at a flush. */
typedef struct ts_convert {
    int on;
    uint64_t tsc0, ns0;
    double ns_per_tick;
} ts_convert;

ts_convert conversion_at(uint64_t flush_tsc, uint64_t flush_ns);

static inline uint64_t convert_ts(const ts_convert* c, uint64_t ts)
{
    double d = (double)(int64_t)(ts - c->tsc0) * c->ns_per_tick;
    return (uint64_t)((int64_t)c->ns0 + (int64_t)(d < 0 ? d - 0.5 : d + 0.5));
}

/* buffers.c */
extern _Atomic uint64_t g_allocated;     /* bytes of chunks in use, against g_limit */
extern uint64_t g_limit;
__attribute__((noinline)) char* reserve_slow(thread_buffer* b, size_t n, int closing);
void chunk_unmap(chunk* c);
void spare_give(chunk* c);
void spare_drain(void);
void spare_reset_in_child(void);
void free_chunks(thread_buffer* b);

/* What the inline paths may fill the tail up to (see thread_buffer.limit). */
static inline size_t tail_limit(const thread_buffer* b)
{
    return b->tail && !b->tail->closing_only && !b->owed_total ? b->tail->cap : 0;
}

/* events.c */
extern _Atomic uint64_t g_lost;          /* events lost before a thread had a buffer */
extern const slot g_event_slots[];
extern const size_t g_event_slot_count;
thread_buffer* current_thread_buffer(void);

/* registry.c */
extern domain_entry* g_domains;          /* under g_lock */
extern uint32_t g_domain_count;
extern string_entry* g_strings_first;
extern string_entry* g_strings_last;
extern named_entry* g_categories;        /* newest first */
extern named_entry* g_thread_names;      /* newest first */
extern const slot g_registry_slots[];
extern const size_t g_registry_slot_count;
size_t utf8_from_wide(const wchar_t* w, char* out, size_t cap);
void free_named(named_entry* e);

static inline uint32_t domain_id(nvtxDomainHandle_t d)
{
    return d ? ((const domain_entry*)(const void*)d)->id : 0;
}

/* spill.c: the recording's writers (they run under g_lock, one at a time) */
#define WRITE_BUFFER (1u << 20)

typedef struct writer {
    int fd;
    char* buf; /* WRITE_BUFFER bytes */
    size_t len;
    uint64_t bytes;
    int failed;  /* the errno of the first failed write (ENOSPC, ...), else 0 */
} writer;

/* What of the registries a file already holds (the live spill file, or one explicit flush). */
typedef struct file_cursor {
    uint32_t domains;           /* domains with an id up to this are written */
    string_entry* last_string;  /* strings up to this one are written */
    named_entry* categories;    /* the category list's head when last written */
    named_entry* thread_names;  /* the thread-name list's head when last written */
    int last_final;             /* the last SPILL section written was a final one */
} file_cursor;

extern char g_write_buffer[WRITE_BUFFER];
void drain(writer* w);
void put(writer* w, const void* p, size_t n);
void put_u32(writer* w, uint32_t v);
void put_u64(writer* w, uint64_t v);
void pad(writer* w, size_t n);
void section(writer* w, uint32_t tag, uint64_t length);
int64_t realtime_offset(void);
void write_header(writer* w);
void write_registries(writer* w, file_cursor* cur);
void ensure_spiller(void);
void spill_nudge(size_t bytes);
void stop_spiller(void);
void spill_reset_in_child(void);
void finish_spill_file(void);

/* flight.c: the flight recorder (AUTONVTX_FLIGHT_RANGE), run by the spiller under g_lock */
extern int g_flight;
extern int g_flight_spill;               /* 0: the live file is not written (no --summary wants it) */
void flight_configure(void);
void flight_scan(thread_buffer* b, chunk* first, size_t from, chunk* last, size_t last_used);
void flight_after_spill(void);
void flight_forget_thread(thread_buffer* b);
void flight_reset_in_child(void);


#pragma GCC visibility pop

#endif
