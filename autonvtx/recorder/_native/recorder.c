/*
 * autonvtx native recorder: an NVTX v3 injection library that records every NVTX event of
 * the process into per-thread memory buffers and writes them to one binary file per process.
 *
 * Loading: every NVTX client in the process (each .so that compiled the NVTX headers) dlopens
 * $NVTX_INJECTION64_PATH on its first NVTX call and calls InitializeInjectionNvtx2 with its own
 * export table; we fill that client's CORE and CORE2 callback slots and remember the tables so
 * that autonvtx_recorder_set_mode() can switch every client between the recording callbacks and
 * callbacks that do nothing (a "no-op tool", the benchmarks' baseline).
 *
 * Hot path: a thread-local buffer pointer (registered under a mutex once per thread), append-only
 * chunks, and a per-chunk committed length stored with release semantics, so a writer from another
 * thread reads a consistent prefix without locking the writers. Memory is bounded by a global
 * byte budget (AUTONVTX_RECORD_LIMIT_MB, default 512) checked only when a chunk is allocated;
 * past it, events are counted as dropped per thread and the program goes on.
 *
 * Spilling: with AUTONVTX_RECORD_DIR set, a thread of ours (the spiller) appends what is new to
 * $AUTONVTX_RECORD_DIR/<pid>.anr every 100 ms and unmaps the chunks it wrote, so memory stays
 * small and a process killed hard loses at most its last 100 ms. With AUTONVTX_RECORD_KEEP=last,
 * nothing is spilled: a thread whose chunk is full while the budget is spent reuses its oldest
 * chunk (a ring), and the file is written at exit with the most recent events.
 *
 * The file format is defined in anr_format.h.
 */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "anr_format.h"

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
#define MAX_CLIENTS 256
#define NAME_BYTES 64
#define STRING_BUCKETS 4096u

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
} thread_buffer;

typedef struct domain_entry { /* what an nvtxDomainHandle_t points to */
    struct domain_entry* next;
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

typedef struct client_tables {
    NvtxFunctionTable core;
    unsigned int core_size;
    NvtxFunctionTable core2;
    unsigned int core2_size;
} client_tables;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_buffer* g_threads;         /* under g_lock */
static uint32_t g_thread_index;          /* under g_lock */
static domain_entry* g_domains;          /* under g_lock */
static uint32_t g_domain_count;
static string_entry* g_string_buckets[STRING_BUCKETS];
static string_entry* g_strings_first;
static string_entry* g_strings_last;
static uint32_t g_string_count;
static named_entry* g_categories;        /* newest first */
static named_entry* g_thread_names;      /* newest first */
static client_tables g_clients[MAX_CLIENTS];
static int g_client_count;

static _Atomic int g_attached;
static _Atomic int g_flushed;
static _Atomic int g_mode_noop;
static _Atomic uint64_t g_allocated;     /* bytes of chunks in use, against g_limit */
static uint64_t g_limit = 512ull << 20;
static _Atomic uint64_t g_lost;          /* events lost before a thread had a buffer */
static pid_t g_pid;
static int g_keep_last;                  /* AUTONVTX_RECORD_KEEP=last: a ring of chunks per thread */
static char g_record_dir[4096];          /* AUTONVTX_RECORD_DIR when the library loaded, or "" */

static __thread thread_buffer* t_buffer;

/* ---- time, ids ---- */

static uint64_t now_ns(void)
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
static int g_use_tsc;
static uint64_t g_anchor_tsc, g_anchor_ns;

static __attribute__((noinline)) uint64_t now_ns_call(void) { return now_ns(); }

static inline uint64_t now_ts(void)
{
#ifdef HAVE_TSC
    if (LIKELY(g_use_tsc))
        return __rdtsc();
#endif
    return now_ns_call();
}

/* A (TSC, CLOCK_MONOTONIC ns) pair read as close together as a few tries allow. */
static void read_anchor(uint64_t* tsc, uint64_t* ns)
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

static void choose_clock(void)
{
    const char* clock = getenv("AUTONVTX_RECORDER_CLOCK");
    g_use_tsc = !(clock && strcmp(clock, "monotonic") == 0) && cpu_has_stable_tsc();
    if (g_use_tsc)
        read_anchor(&g_anchor_tsc, &g_anchor_ns);
}

/* Converts recorded timestamps to CLOCK_MONOTONIC ns at a flush. */
typedef struct ts_convert {
    int on;
    uint64_t tsc0, ns0;
    double ns_per_tick;
} ts_convert;

static ts_convert conversion_at(uint64_t flush_tsc, uint64_t flush_ns)
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

static inline uint64_t convert_ts(const ts_convert* c, uint64_t ts)
{
    double d = (double)(int64_t)(ts - c->tsc0) * c->ns_per_tick;
    return (uint64_t)((int64_t)c->ns0 + (int64_t)(d < 0 ? d - 0.5 : d + 0.5));
}

static uint32_t os_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* ---- per-thread buffers ---- */

static thread_buffer* register_thread(void)
{
    thread_buffer* b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->tid = os_tid();
    if (pthread_getname_np(pthread_self(), b->name, sizeof(b->name)) != 0)
        b->name[0] = '\0';
    pthread_mutex_lock(&g_lock);
    b->index = ++g_thread_index;
    b->next = g_threads;
    g_threads = b;
    pthread_mutex_unlock(&g_lock);
    t_buffer = b;
    return b;
}

static inline thread_buffer* buffer(void)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b))
        b = register_thread();
    return b;
}

static void drop(thread_buffer* b)
{
    if (b)
        atomic_store_explicit(&b->dropped,
            atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&g_lost, 1, memory_order_relaxed);
}

/*
 * Chunks are mapped directly. A thread's first chunk is small (128 KiB, ordinary pages); once a
 * thread has filled one, the next ones are 2 MiB, aligned and advised as a transparent huge page
 * where the kernel offers them: one page fault per 2 MiB of events instead of one per 4 KiB
 * (faults cost several ns per event, more in a VM). The budget counts mapped bytes.
 */
static chunk* chunk_map(size_t size, int huge)
{
    char* p;
    if (!huge) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : (chunk*)(void*)p;
    }
    p = mmap(NULL, size + BIG_CHUNK_MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    {
        uintptr_t start = ((uintptr_t)p + BIG_CHUNK_MAP - 1) & ~(uintptr_t)(BIG_CHUNK_MAP - 1);
        size_t head = start - (uintptr_t)p;
        size_t tail = BIG_CHUNK_MAP - head;
        if (head)
            munmap(p, head);
        if (tail)
            munmap((char*)start + size, tail);
        p = (char*)start;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);
#endif
    return (chunk*)(void*)p;
}

static void chunk_unmap(chunk* c)
{
    munmap(c, sizeof(chunk) + c->cap);
}

/*
 * Big chunks the spiller has written wait here for a thread that needs one, pages already
 * faulted in (a fresh mapping costs a fault per 4 KiB where huge pages are not given). They
 * stay counted in g_allocated: they are resident.
 */
#define SPARE_CHUNKS 8
static pthread_mutex_t g_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk* g_spare[SPARE_CHUNKS];
static int g_spare_count;

static chunk* spare_take(void)
{
    chunk* c = NULL;
    pthread_mutex_lock(&g_spare_lock);
    if (g_spare_count > 0)
        c = g_spare[--g_spare_count];
    pthread_mutex_unlock(&g_spare_lock);
    return c;
}

/* Keeps a written big chunk for reuse, or unmaps it (and gives its bytes back to the budget). */
static void spare_give(chunk* c)
{
    pthread_mutex_lock(&g_spare_lock);
    if (c->cap + sizeof(chunk) == BIG_CHUNK_MAP && g_spare_count < SPARE_CHUNKS) {
        g_spare[g_spare_count++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&g_spare_lock);
    if (c) {
        atomic_fetch_sub_explicit(&g_allocated, sizeof(chunk) + c->cap, memory_order_relaxed);
        chunk_unmap(c);
    }
}

/* At the final write: nothing will want them (and the exporter is about to need memory). */
static void spare_drain(void)
{
    pthread_mutex_lock(&g_spare_lock);
    while (g_spare_count > 0) {
        chunk* c = g_spare[--g_spare_count];
        atomic_fetch_sub_explicit(&g_allocated, sizeof(chunk) + c->cap, memory_order_relaxed);
        chunk_unmap(c);
    }
    pthread_mutex_unlock(&g_spare_lock);
}

enum { CHUNK_SMALL, CHUNK_BIG, CHUNK_CLOSING };
#define CLOSING_CHUNK_BYTES 4096u

/* A new chunk of at least n bytes taken from the budget, or NULL; CHUNK_CLOSING: a small one
   past the budget, for the pops and ends of ranges already kept. */
static chunk* chunk_new(size_t n, int kind)
{
    int big = kind == CHUNK_BIG;
    size_t least = kind == CHUNK_CLOSING ? CLOSING_CHUNK_BYTES : CHUNK_BYTES;
    uint64_t size = big ? BIG_CHUNK_MAP : sizeof(chunk) + (n > least ? n : least);
    uint64_t before;
    chunk* c;
    if (big && n + sizeof(chunk) > size)
        return NULL;
    if (big && (c = spare_take()) != NULL) {
        atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
        atomic_store_explicit(&c->used, 0, memory_order_relaxed);
        c->events = 0;
        c->closing_only = 0;
        return c;
    }
    before = atomic_fetch_add_explicit(&g_allocated, size, memory_order_relaxed);
    if (before + size > g_limit && kind != CHUNK_CLOSING) {
        atomic_fetch_sub_explicit(&g_allocated, size, memory_order_relaxed);
        return NULL;
    }
    c = chunk_map(size, big);
    if (!c) {
        atomic_fetch_sub_explicit(&g_allocated, size, memory_order_relaxed);
        return NULL;
    }
    atomic_init(&c->next, NULL);
    atomic_init(&c->used, 0);
    c->events = 0;
    c->cap = size - sizeof(chunk);
    c->closing_only = kind == CHUNK_CLOSING;
    return c;
}

static void ensure_spiller(void);

/* Keep-last mode: the thread's oldest chunk, emptied, to be its new tail; NULL if it has one only. */
static chunk* recycle_oldest(thread_buffer* b, size_t n)
{
    chunk* c;
    pthread_mutex_lock(&g_lock); /* a flush may be reading the chunk */
    c = atomic_load_explicit(&b->head, memory_order_relaxed);
    if (!c || c == b->tail || c->cap < n) {
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    atomic_store_explicit(&b->head, atomic_load_explicit(&c->next, memory_order_relaxed),
                          memory_order_release);
    atomic_store_explicit(&b->discarded,
        atomic_load_explicit(&b->discarded, memory_order_relaxed) + c->events, memory_order_relaxed);
    b->wrapped = 1;
    if (b->spill_chunk == c) {
        b->spill_chunk = NULL;
        b->spill_off = 0;
    }
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&c->used, 0, memory_order_relaxed);
    c->events = 0;
    c->closing_only = 0;
    pthread_mutex_unlock(&g_lock);
    return c;
}

/* What the inline paths may fill the tail up to (see thread_buffer.limit). */
static inline size_t tail_limit(const thread_buffer* b)
{
    return b->tail && !b->tail->closing_only && !b->owed_total ? b->tail->cap : 0;
}

/*
 * A new chunk for an n-byte record. Memory for events is bounded by the budget, but what is kept
 * must stay true: a pop or an end (`closing`) closes a range whose push or start was kept, so when
 * the budget refuses it, it gets a small chunk past the budget, which only pops and ends may use
 * (so the overshoot stays within 16 bytes per range open at that moment). Pushes, starts and
 * marks are left out instead; see owe_pop for the pops of pushes left out.
 */
static chunk* next_chunk(thread_buffer* b, size_t n, int closing)
{
    chunk* c = NULL;
    if (!b->full) {
        c = b->tail ? chunk_new(n, CHUNK_BIG) : NULL;
        if (!c)
            c = chunk_new(n, CHUNK_SMALL);
        if (!c && g_keep_last && b->tail)
            c = recycle_oldest(b, n);
        /* While the spiller frees what it has written, the budget may allow a chunk later. */
        if (!c && (!g_record_dir[0] || g_keep_last))
            b->full = 1;
    }
    if (!c && closing)
        c = chunk_new(n, CHUNK_CLOSING);
    return c;
}

static __attribute__((noinline)) char* reserve_slow(thread_buffer* b, size_t n, int closing)
{
    chunk* c;
    uint64_t events = atomic_load_explicit(&b->events, memory_order_relaxed);
    if (g_record_dir[0] && !g_keep_last)
        ensure_spiller(); /* once per process: cheap when it runs */
    c = b->tail;
    if (c && b->tail_used + n <= c->cap && (closing || !c->closing_only))
        return c->data + b->tail_used;
    c = next_chunk(b, n, closing);
    if (!c)
        return NULL;
    if (b->tail) {
        b->tail->events = events - b->tail_events_base;
        atomic_store_explicit(&b->tail->next, c, memory_order_release);
    } else {
        atomic_store_explicit(&b->head, c, memory_order_release);
    }
    b->tail = c;
    b->tail_used = 0;
    b->tail_events_base = events;
    b->limit = tail_limit(b);
    return c->data;
}

/* Space for an n-byte record (n a multiple of 8) in the thread's buffer; NULL means drop. */
static inline char* reserve(thread_buffer* b, size_t n, int closing)
{
    if (LIKELY(b->tail_used + n <= b->limit))
        return b->tail->data + b->tail_used;
    return reserve_slow(b, n, closing);
}

static inline void commit(thread_buffer* b, size_t n)
{
    b->tail_used += n;
    atomic_store_explicit(&b->tail->used, b->tail_used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- strings ---- */

/* UTF-32 (Linux wchar_t) to UTF-8; invalid code points become U+FFFD. Returns bytes written. */
static size_t utf8_from_wide(const wchar_t* w, char* out, size_t cap)
{
    size_t n = 0;
    for (; *w; ++w) {
        uint32_t c = (uint32_t)*w;
        char tmp[4];
        size_t k;
        if (c >= 0xD800 && c <= 0xDFFF)
            c = 0xFFFD;
        if (c < 0x80) {
            tmp[0] = (char)c; k = 1;
        } else if (c < 0x800) {
            tmp[0] = (char)(0xC0 | (c >> 6)); tmp[1] = (char)(0x80 | (c & 0x3F)); k = 2;
        } else if (c < 0x10000) {
            tmp[0] = (char)(0xE0 | (c >> 12)); tmp[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            tmp[2] = (char)(0x80 | (c & 0x3F)); k = 3;
        } else if (c < 0x110000) {
            tmp[0] = (char)(0xF0 | (c >> 18)); tmp[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            tmp[2] = (char)(0x80 | ((c >> 6) & 0x3F)); tmp[3] = (char)(0x80 | (c & 0x3F)); k = 4;
        } else {
            tmp[0] = (char)0xEF; tmp[1] = (char)0xBF; tmp[2] = (char)0xBD; k = 3;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, tmp, k);
        n += k;
    }
    return n;
}

/* A malloc'ed UTF-8 copy of a wide string (rare paths: names, registrations). */
static char* dup_wide(const wchar_t* w)
{
    size_t len = w ? wcslen(w) : 0;
    char* s = malloc(len * 4 + 1);
    if (!s)
        return NULL;
    s[w ? utf8_from_wide(w, s, len * 4) : 0] = '\0';
    return s;
}

/* ---- event writers ---- */

/* Fills a reserved record's head; the timestamp is taken last, once the space is ours. */
static inline void put_head(char* p, uint8_t kind, uint8_t flags, uint8_t payload_type,
                            uint8_t message_kind, uint32_t domain)
{
    anr_record_head* h = (anr_record_head*)p;
    h->kind = kind;
    h->flags = flags;
    h->payload_type = payload_type;
    h->message_kind = message_kind;
    h->domain = domain;
    h->ts = now_ts();
}

/* The event writers return 1 when the record was written, 0 when it was dropped (and counted). */
static inline int write_simple(uint8_t kind, uint32_t domain, uint64_t id)
{
    thread_buffer* b = buffer();
    size_t n = sizeof(anr_record_head) + (id ? 8 : 0);
    char* p = b ? reserve(b, n, kind == ANR_K_POP || kind == ANR_K_END) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        return 0;
    }
    put_head(p, kind, 0, 0, 0, domain);
    if (id)
        memcpy(p + sizeof(anr_record_head), &id, 8);
    commit(b, n);
    return 1;
}

/* Writes a push/start/mark with an inline message (ASCII or UTF-8) and no other attribute. */
static inline int write_text(uint8_t kind, uint32_t domain, uint64_t id, const char* text,
                             size_t len)
{
    thread_buffer* b = buffer();
    if (len > MAX_MESSAGE)
        len = MAX_MESSAGE;
    size_t n = ANR_ALIGN8(sizeof(anr_record_head) + (id ? 8 : 0) + 4 + len);
    char* p = b ? reserve(b, n, 0) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        return 0;
    }
    put_head(p, kind, 0, 0, ANR_M_INLINE, domain);
    char* q = p + sizeof(anr_record_head);
    if (id) {
        memcpy(q, &id, 8);
        q += 8;
    }
    uint32_t len32 = (uint32_t)len;
    memcpy(q, &len32, 4);
    memcpy(q + 4, text, len);
    memset(q + 4 + len, 0, (size_t)(p + n - (q + 4 + len)));
    commit(b, n);
    return 1;
}

static inline int write_wide(uint8_t kind, uint32_t domain, uint64_t id, const wchar_t* w)
{
    char tmp[1024];
    int written;
    if (!w)
        return write_text(kind, domain, id, "", 0);
    size_t wl = wcslen(w);
    if (wl * 4 <= sizeof(tmp))
        return write_text(kind, domain, id, tmp, utf8_from_wide(w, tmp, sizeof(tmp)));
    size_t cap = wl * 4 < MAX_MESSAGE ? wl * 4 : MAX_MESSAGE;
    char* big = malloc(cap);
    if (!big)
        return write_text(kind, domain, id, "", 0);
    written = write_text(kind, domain, id, big, utf8_from_wide(w, big, cap));
    free(big);
    return written;
}

static inline uint32_t domain_id(nvtxDomainHandle_t d)
{
    return d ? ((const domain_entry*)(const void*)d)->id : 0;
}

/* An event's message, made ready to copy: inline UTF-8 (wide strings converted) or a string id. */
typedef struct message {
    uint8_t kind;          /* ANR_M_NONE, ANR_M_INLINE, ANR_M_REGISTERED */
    const char* text;
    size_t len;
    uint32_t string_id;
    char* big;             /* malloc'ed conversion of a long wide string, freed by the caller */
    char tmp[1024];
} message;

static inline void read_message(const nvtxEventAttributes_t* a, message* m)
{
    m->kind = ANR_M_NONE;
    m->big = NULL;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) {
        m->kind = ANR_M_INLINE;
        m->text = a->message.ascii;
        m->len = strlen(m->text);
        if (m->len > MAX_MESSAGE)
            m->len = MAX_MESSAGE;
    } else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE && a->message.unicode) {
        size_t wl = wcslen(a->message.unicode);
        char* out = m->tmp;
        size_t cap = sizeof(m->tmp);
        if (wl * 4 > cap) {
            cap = wl * 4 < MAX_MESSAGE ? wl * 4 : MAX_MESSAGE;
            out = m->big = malloc(cap);
        }
        if (out) {
            m->kind = ANR_M_INLINE;
            m->text = out;
            m->len = utf8_from_wide(a->message.unicode, out, cap);
        }
    } else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered) {
        m->kind = ANR_M_REGISTERED;
        m->string_id = ((const string_entry*)(const void*)a->message.registered)->id;
    }
}

/* Copies what follows a record's head: [id] [payload] [color] [category] [message], padded. */
static inline void put_body(char* q, char* end, uint64_t id, uint8_t flags, uint8_t payload_type,
                            const nvtxEventAttributes_t* a, const message* m)
{
    if (id) {
        memcpy(q, &id, 8);
        q += 8;
    }
    if (payload_type) {
        memcpy(q, &a->payload, 8);
        q += 8;
    }
    if (flags & ANR_F_COLOR) {
        memcpy(q, &a->color, 4);
        q += 4;
    }
    if (flags & ANR_F_CATEGORY) {
        memcpy(q, &a->category, 4);
        q += 4;
    }
    if (m->kind == ANR_M_REGISTERED) {
        memcpy(q, &m->string_id, 4);
        q += 4;
    } else if (m->kind == ANR_M_INLINE) {
        uint32_t len32 = (uint32_t)m->len;
        memcpy(q, &len32, 4);
        memcpy(q + 4, m->text, m->len);
        q += 4 + m->len;
    }
    memset(q, 0, (size_t)(end - q));
}

static inline int write_attributes(uint8_t kind, uint32_t domain, uint64_t id,
                                   const nvtxEventAttributes_t* a)
{
    if (UNLIKELY(!a))
        return write_simple(kind, domain, id);
    thread_buffer* b = buffer();
    uint8_t flags = 0, payload_type = 0;
    size_t n = sizeof(anr_record_head) + (id ? 8 : 0);
    message m;

    if (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 && a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT) {
        payload_type = (uint8_t)a->payloadType;
        n += 8;
    }
    if (a->colorType == NVTX_COLOR_ARGB) {
        flags |= ANR_F_COLOR;
        n += 4;
    }
    if (a->category != 0) {
        flags |= ANR_F_CATEGORY;
        n += 4;
    }
    read_message(a, &m);
    n = ANR_ALIGN8(n + (m.kind == ANR_M_INLINE ? 4 + m.len : m.kind == ANR_M_REGISTERED ? 4 : 0));
    char* p = b ? reserve(b, n, 0) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        free(m.big);
        return 0;
    }
    put_head(p, kind, flags, payload_type, m.kind, domain);
    put_body(p + sizeof(anr_record_head), p + n, id, flags, payload_type, a, &m);
    commit(b, n);
    free(m.big);
    return 1;
}

static inline uint64_t new_range_id(void)
{
    thread_buffer* b = buffer();
    if (UNLIKELY(!b))
        return 0;
    return ((uint64_t)b->index << 40) | ++b->next_seq;
}

/*
 * Whole ranges or nothing. Once a push is left out (the budget refused it), its pop must be left
 * out too, and so must every push opened until then and its pop: a kept push whose pop is lost
 * would last until the end of the recording, and a pop whose push is lost would end the range
 * around it. Per domain (pushes and pops nest within a domain), the thread counts the pops it
 * owes; while it owes any, every push is left out (and owes its pop), and a pop in a domain that
 * owes one is left out and pays it. Kept pushes get their pops (reserve_slow). Marks and
 * start/end ranges go on meanwhile: they nest in nothing.
 */
static void owe_pop(thread_buffer* b, uint32_t domain)
{
    uint32_t i;
    b->owed_total++;
    b->limit = 0; /* the inline paths step aside until every owed pop came */
    for (i = 0; i < b->owed_len; ++i) {
        if (b->owed[i].domain == domain) {
            b->owed[i].count++;
            return;
        }
    }
    if (b->owed_len == b->owed_cap) {
        uint32_t cap = b->owed_cap ? b->owed_cap * 2 : 4;
        owed_pop* grown = realloc(b->owed, cap * sizeof(*grown));
        if (!grown) { /* out of memory: nothing can be promised any more */
            b->owed_total--;
            b->limit = tail_limit(b);
            return;
        }
        b->owed = grown;
        b->owed_cap = cap;
    }
    b->owed[b->owed_len].domain = domain;
    b->owed[b->owed_len++].count = 1;
}

/* Whether a pop in `domain` closes a push that was left out; then it is paid (and dropped). */
static int pay_owed_pop(thread_buffer* b, uint32_t domain)
{
    uint32_t i;
    for (i = 0; i < b->owed_len; ++i) {
        if (b->owed[i].domain == domain) {
            if (--b->owed[i].count == 0)
                b->owed[i] = b->owed[--b->owed_len];
            if (--b->owed_total == 0)
                b->limit = tail_limit(b);
            drop(b);
            return 1;
        }
    }
    return 0;
}

/* Before writing a push: 1 when it must be left out (the thread owes pops), counted. */
static inline int push_left_out(thread_buffer* b)
{
    if (b && UNLIKELY(b->owed_total != 0)) {
        drop(b);
        return 1;
    }
    return 0;
}

/* After a push was written or left out: the nesting level NVTX returns. */
static int pushed(thread_buffer* b, uint32_t domain, int written)
{
    if (!b)
        return 0;
    if (!written)
        owe_pop(b, domain);
    return b->depth++;
}

static inline int depth_pop(thread_buffer* b)
{
    if (!b)
        return -1;
    if (b->depth > 0)
        b->depth--;
    return b->depth;
}

/* A start left out: its id says so (bit 63; ids are index << 40 | seq), and its end is left out. */
#define START_LEFT_OUT (1ull << 63)

static inline uint64_t started(uint64_t id, int written)
{
    return written ? id : id | START_LEFT_OUT;
}

static void end_range(uint32_t domain, uint64_t id)
{
    if (!id)
        return;
    if (id & START_LEFT_OUT)
        drop(buffer());
    else
        write_simple(ANR_K_END, domain, id);
}

/*
 * The hot paths: a push whose message is a registered string (autonvtx's ranges, nvtx's
 * annotate with a domain) and a pop, when the thread's current chunk has room. They write the
 * same records as write_attributes/write_simple with whole-word stores and one commit; anything
 * else (first event of a thread, a full chunk, inline or wide messages, payloads) returns 0 and
 * takes the general path.
 */
static inline int push_fast(uint32_t domain, const nvtxEventAttributes_t* a, int* depth)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b || !a || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED || !a->message.registered
                 || (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64
                     && a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT)))
        return 0;
    chunk* c = b->tail;
    size_t used = b->tail_used;
    if (UNLIKELY(used + 32 > b->limit))
        return 0;
    uint32_t words[4];
    unsigned k = 0;
    uint64_t flags = 0;
    if (a->colorType == NVTX_COLOR_ARGB) {
        flags |= ANR_F_COLOR;
        words[k++] = a->color;
    }
    if (a->category != 0) {
        flags |= ANR_F_CATEGORY;
        words[k++] = a->category;
    }
    words[k++] = ((const string_entry*)(const void*)a->message.registered)->id;
    words[k] = 0;
    char* p = c->data + used;
    uint64_t head = (uint64_t)ANR_K_PUSH | (flags << 8) | ((uint64_t)ANR_M_REGISTERED << 24)
                  | ((uint64_t)domain << 32);
    uint64_t ts = now_ts();
    memcpy(p, &head, 8);
    memcpy(p + 8, &ts, 8);
    memcpy(p + 16, words, 8);
    size_t n = 24;
    if (k > 2) {
        memcpy(p + 24, words + 2, 8);
        n = 32;
    }
    used += n;
    b->tail_used = used;
    atomic_store_explicit(&c->used, used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
    *depth = b->depth++;
    return 1;
}

static inline int pop_fast(uint32_t domain, int* depth)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b))
        return 0;
    chunk* c = b->tail;
    size_t used = b->tail_used;
    if (UNLIKELY(used + 16 > b->limit))
        return 0;
    char* p = c->data + used;
    uint64_t head = (uint64_t)ANR_K_POP | ((uint64_t)domain << 32);
    uint64_t ts = now_ts();
    memcpy(p, &head, 8);
    memcpy(p + 8, &ts, 8);
    used += 16;
    b->tail_used = used;
    atomic_store_explicit(&c->used, used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
    if (b->depth > 0)
        b->depth--;
    *depth = b->depth;
    return 1;
}

static __attribute__((noinline)) int push_slow(uint32_t domain, const nvtxEventAttributes_t* a)
{
    thread_buffer* b = buffer();
    return pushed(b, domain, !push_left_out(b) && write_attributes(ANR_K_PUSH, domain, 0, a));
}

static __attribute__((noinline)) int pop_slow(uint32_t domain)
{
    thread_buffer* b = buffer();
    if (!b || !b->owed_total || !pay_owed_pop(b, domain))
        write_simple(ANR_K_POP, domain, 0);
    return depth_pop(b);
}

/* ---- recording callbacks: CORE ---- */

static void NVTX_API rec_MarkEx(const nvtxEventAttributes_t* a) { write_attributes(ANR_K_MARK, 0, 0, a); }
static void NVTX_API rec_MarkA(const char* m) { write_text(ANR_K_MARK, 0, 0, m ? m : "", m ? strlen(m) : 0); }
static void NVTX_API rec_MarkW(const wchar_t* m) { write_wide(ANR_K_MARK, 0, 0, m); }

static nvtxRangeId_t NVTX_API rec_RangeStartEx(const nvtxEventAttributes_t* a)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_attributes(ANR_K_START, 0, id, a)) : 0;
}
static nvtxRangeId_t NVTX_API rec_RangeStartA(const char* m)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_text(ANR_K_START, 0, id, m ? m : "", m ? strlen(m) : 0)) : 0;
}
static nvtxRangeId_t NVTX_API rec_RangeStartW(const wchar_t* m)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_wide(ANR_K_START, 0, id, m)) : 0;
}
static void NVTX_API rec_RangeEnd(nvtxRangeId_t id) { end_range(0, id); }

static int NVTX_API rec_RangePushEx(const nvtxEventAttributes_t* a)
{
    int depth;
    if (LIKELY(push_fast(0, a, &depth)))
        return depth;
    return push_slow(0, a);
}
static int NVTX_API rec_RangePushA(const char* m)
{
    thread_buffer* b = buffer();
    return pushed(b, 0, !push_left_out(b) && write_text(ANR_K_PUSH, 0, 0, m ? m : "", m ? strlen(m) : 0));
}
static int NVTX_API rec_RangePushW(const wchar_t* m)
{
    thread_buffer* b = buffer();
    return pushed(b, 0, !push_left_out(b) && write_wide(ANR_K_PUSH, 0, 0, m));
}
static int NVTX_API rec_RangePop(void)
{
    int depth;
    if (LIKELY(pop_fast(0, &depth)))
        return depth;
    return pop_slow(0);
}

/* ---- metadata: categories, thread names, domains, registered strings ---- */

static void add_named(named_entry** list, uint32_t a, uint32_t b, char* name)
{
    named_entry* e;
    if (!name)
        return;
    e = malloc(sizeof(*e));
    if (!e) {
        free(name);
        return;
    }
    e->a = a;
    e->b = b;
    e->name = name;
    pthread_mutex_lock(&g_lock);
    e->next = *list;
    *list = e;
    pthread_mutex_unlock(&g_lock);
}

static void NVTX_API rec_NameCategoryA(uint32_t c, const char* n) { add_named(&g_categories, 0, c, strdup(n ? n : "")); }
static void NVTX_API rec_NameCategoryW(uint32_t c, const wchar_t* n) { add_named(&g_categories, 0, c, dup_wide(n)); }
static void NVTX_API rec_NameOsThreadA(uint32_t t, const char* n) { add_named(&g_thread_names, t, 0, strdup(n ? n : "")); }
static void NVTX_API rec_NameOsThreadW(uint32_t t, const wchar_t* n) { add_named(&g_thread_names, t, 0, dup_wide(n)); }

static nvtxDomainHandle_t domain_create(char* name)
{
    domain_entry* d;
    if (!name)
        return NULL;
    pthread_mutex_lock(&g_lock);
    for (d = g_domains; d; d = d->next)
        if (strcmp(d->name, name) == 0)
            break;
    if (!d && (d = malloc(sizeof(*d))) != NULL) {
        d->id = ++g_domain_count;
        d->name = name;
        name = NULL;
        d->next = g_domains;
        g_domains = d;
    }
    pthread_mutex_unlock(&g_lock);
    free(name);
    return (nvtxDomainHandle_t)(void*)d;
}

static uint32_t hash_string(uint32_t domain, const char* s)
{
    uint32_t h = 2166136261u ^ domain;
    for (; *s; ++s)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static nvtxStringHandle_t string_register(uint32_t domain, char* text)
{
    string_entry* e;
    uint32_t bucket;
    if (!text)
        return NULL;
    bucket = hash_string(domain, text) % STRING_BUCKETS;
    pthread_mutex_lock(&g_lock);
    for (e = g_string_buckets[bucket]; e; e = e->next)
        if (e->domain == domain && strcmp(e->text, text) == 0)
            break;
    if (!e && (e = malloc(sizeof(*e))) != NULL) {
        e->id = ++g_string_count;
        e->domain = domain;
        e->text = text;
        e->len = (uint32_t)strlen(text);
        text = NULL;
        e->next = g_string_buckets[bucket];
        g_string_buckets[bucket] = e;
        e->next_in_order = NULL;
        if (g_strings_last)
            g_strings_last->next_in_order = e;
        else
            g_strings_first = e;
        g_strings_last = e;
    }
    pthread_mutex_unlock(&g_lock);
    free(text);
    return (nvtxStringHandle_t)(void*)e;
}

/* ---- recording callbacks: CORE2 (domains) ---- */

static void NVTX_API rec_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { write_attributes(ANR_K_MARK, domain_id(d), 0, a); }
static nvtxRangeId_t NVTX_API rec_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_attributes(ANR_K_START, domain_id(d), id, a)) : 0;
}
static void NVTX_API rec_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { end_range(domain_id(d), id); }
static int NVTX_API rec_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
{
    int depth;
    if (LIKELY(push_fast(domain_id(d), a, &depth)))
        return depth;
    return push_slow(domain_id(d), a);
}
static int NVTX_API rec_DomainRangePop(nvtxDomainHandle_t d)
{
    int depth;
    if (LIKELY(pop_fast(domain_id(d), &depth)))
        return depth;
    return pop_slow(domain_id(d));
}
static void NVTX_API rec_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char* n) { add_named(&g_categories, domain_id(d), c, strdup(n ? n : "")); }
static void NVTX_API rec_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t* n) { add_named(&g_categories, domain_id(d), c, dup_wide(n)); }
static nvtxStringHandle_t NVTX_API rec_DomainRegisterStringA(nvtxDomainHandle_t d, const char* s) { return string_register(domain_id(d), strdup(s ? s : "")); }
static nvtxStringHandle_t NVTX_API rec_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* s) { return string_register(domain_id(d), dup_wide(s)); }
static nvtxDomainHandle_t NVTX_API rec_DomainCreateA(const char* n) { return domain_create(strdup(n ? n : "")); }
static nvtxDomainHandle_t NVTX_API rec_DomainCreateW(const wchar_t* n) { return domain_create(dup_wide(n)); }

/* ---- no-op callbacks: a tool that is attached but does nothing ---- */

static void NVTX_API noop_MarkEx(const nvtxEventAttributes_t* a) { (void)a; }
static void NVTX_API noop_MarkA(const char* m) { (void)m; }
static void NVTX_API noop_MarkW(const wchar_t* m) { (void)m; }
static nvtxRangeId_t NVTX_API noop_RangeStartEx(const nvtxEventAttributes_t* a) { (void)a; return 0; }
static nvtxRangeId_t NVTX_API noop_RangeStartA(const char* m) { (void)m; return 0; }
static nvtxRangeId_t NVTX_API noop_RangeStartW(const wchar_t* m) { (void)m; return 0; }
static void NVTX_API noop_RangeEnd(nvtxRangeId_t id) { (void)id; }
static int NVTX_API noop_RangePushEx(const nvtxEventAttributes_t* a) { (void)a; return 0; }
static int NVTX_API noop_RangePushA(const char* m) { (void)m; return 0; }
static int NVTX_API noop_RangePushW(const wchar_t* m) { (void)m; return 0; }
static int NVTX_API noop_RangePop(void) { return 0; }
static void NVTX_API noop_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; }
static nvtxRangeId_t NVTX_API noop_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; return 0; }
static void NVTX_API noop_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; (void)id; }
static int NVTX_API noop_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; return 0; }
static int NVTX_API noop_DomainRangePop(nvtxDomainHandle_t d) { (void)d; return 0; }

typedef struct slot { int module; unsigned int id; NvtxFunctionPointer record; NvtxFunctionPointer noop; } slot;
#define FP(f) ((NvtxFunctionPointer)(f))
#define CORE(name, r, n) { NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_##name, FP(r), FP(n) }
#define CORE2(name, r, n) { NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_##name, FP(r), FP(n) }

static const slot g_slots[] = {
    CORE(MarkEx, rec_MarkEx, noop_MarkEx),
    CORE(MarkA, rec_MarkA, noop_MarkA),
    CORE(MarkW, rec_MarkW, noop_MarkW),
    CORE(RangeStartEx, rec_RangeStartEx, noop_RangeStartEx),
    CORE(RangeStartA, rec_RangeStartA, noop_RangeStartA),
    CORE(RangeStartW, rec_RangeStartW, noop_RangeStartW),
    CORE(RangeEnd, rec_RangeEnd, noop_RangeEnd),
    CORE(RangePushEx, rec_RangePushEx, noop_RangePushEx),
    CORE(RangePushA, rec_RangePushA, noop_RangePushA),
    CORE(RangePushW, rec_RangePushW, noop_RangePushW),
    CORE(RangePop, rec_RangePop, noop_RangePop),
    /* Metadata stays live in no-op mode: handles must stay valid whatever the mode. */
    CORE(NameCategoryA, rec_NameCategoryA, rec_NameCategoryA),
    CORE(NameCategoryW, rec_NameCategoryW, rec_NameCategoryW),
    CORE(NameOsThreadA, rec_NameOsThreadA, rec_NameOsThreadA),
    CORE(NameOsThreadW, rec_NameOsThreadW, rec_NameOsThreadW),
    CORE2(DomainMarkEx, rec_DomainMarkEx, noop_DomainMarkEx),
    CORE2(DomainRangeStartEx, rec_DomainRangeStartEx, noop_DomainRangeStartEx),
    CORE2(DomainRangeEnd, rec_DomainRangeEnd, noop_DomainRangeEnd),
    CORE2(DomainRangePushEx, rec_DomainRangePushEx, noop_DomainRangePushEx),
    CORE2(DomainRangePop, rec_DomainRangePop, noop_DomainRangePop),
    CORE2(DomainNameCategoryA, rec_DomainNameCategoryA, rec_DomainNameCategoryA),
    CORE2(DomainNameCategoryW, rec_DomainNameCategoryW, rec_DomainNameCategoryW),
    CORE2(DomainRegisterStringA, rec_DomainRegisterStringA, rec_DomainRegisterStringA),
    CORE2(DomainRegisterStringW, rec_DomainRegisterStringW, rec_DomainRegisterStringW),
    CORE2(DomainCreateA, rec_DomainCreateA, rec_DomainCreateA),
    CORE2(DomainCreateW, rec_DomainCreateW, rec_DomainCreateW),
};

/* Writes one client's slots for the current mode. Caller holds g_lock. */
static void install(const client_tables* t, int noop)
{
    size_t i;
    for (i = 0; i < sizeof(g_slots) / sizeof(g_slots[0]); ++i) {
        const slot* s = &g_slots[i];
        NvtxFunctionTable table = s->module == NVTX_CB_MODULE_CORE ? t->core : t->core2;
        unsigned int size = s->module == NVTX_CB_MODULE_CORE ? t->core_size : t->core2_size;
        /* out_size is the highest valid callback id (index 0 is the INVALID id). */
        if (table && s->id <= size && table[s->id])
            *table[s->id] = noop ? s->noop : s->record;
    }
}

/* ---- configuration, fork, exit ---- */

static void configure(void)
{
    const char* limit = getenv("AUTONVTX_RECORD_LIMIT_MB");
    const char* mode = getenv("AUTONVTX_RECORDER_MODE");
    const char* keep = getenv("AUTONVTX_RECORD_KEEP");
    const char* dir = getenv("AUTONVTX_RECORD_DIR");
    if (limit && *limit) {
        char* end = NULL;
        double mb = strtod(limit, &end);
        if (end != limit && mb >= 0)
            g_limit = (uint64_t)(mb * 1024.0 * 1024.0);
    }
    atomic_store(&g_mode_noop, mode && strcmp(mode, "noop") == 0);
    g_keep_last = keep && strcmp(keep, "last") == 0;
    g_record_dir[0] = '\0';
    if (dir && strlen(dir) < sizeof(g_record_dir) - 32)
        strcpy(g_record_dir, dir);
}

static void free_chunks(thread_buffer* b)
{
    chunk* c = atomic_load(&b->head);
    while (c) {
        chunk* next = atomic_load(&c->next);
        chunk_unmap(c);
        c = next;
    }
}

static void free_named(named_entry* e)
{
    while (e) {
        named_entry* next = e->next;
        free(e->name);
        free(e);
        e = next;
    }
}

/*
 * The spiller: a thread that hands this process's events to its file every SPILL_PERIOD_MS, so
 * that a process ended by SIGKILL or os._exit() loses at most that much. It is stopped before a
 * fork (a fork child would not have it anyway, and CPython 3.12+ warns at os.fork() in a process
 * that has other threads) and started again by the next chunk a thread of the process takes.
 */
#define SPILL_PERIOD_MS 100
static pthread_mutex_t g_spiller_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_spiller_cond = PTHREAD_COND_INITIALIZER;
static pthread_t g_spiller;
static _Atomic pid_t g_spiller_pid; /* the process whose spiller runs, 0 when none */
static int g_spiller_stop;

static void spill_periodic(void);

static void* spiller_main(void* arg)
{
    struct timespec t;
    (void)arg;
    pthread_mutex_lock(&g_spiller_lock);
    while (!g_spiller_stop) {
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += SPILL_PERIOD_MS * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec += 1;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_spiller_cond, &g_spiller_lock, &t);
        if (g_spiller_stop)
            break;
        pthread_mutex_unlock(&g_spiller_lock);
        spill_periodic();
        pthread_mutex_lock(&g_spiller_lock);
    }
    pthread_mutex_unlock(&g_spiller_lock);
    return NULL;
}

static void ensure_spiller(void)
{
    sigset_t all, old;
    if (LIKELY(atomic_load_explicit(&g_spiller_pid, memory_order_relaxed) == g_pid))
        return;
    pthread_mutex_lock(&g_spiller_lock);
    if (atomic_load(&g_spiller_pid) != g_pid) {
        g_spiller_stop = 0;
        sigfillset(&all); /* signals are the program's: none may land on our thread */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&g_spiller, NULL, spiller_main, NULL) == 0) {
            pthread_setname_np(g_spiller, "autonvtx-spill");
            atomic_store(&g_spiller_pid, g_pid);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&g_spiller_lock);
}

static void stop_spiller(void)
{
    pthread_mutex_lock(&g_spiller_lock);
    if (atomic_load(&g_spiller_pid) != g_pid) {
        pthread_mutex_unlock(&g_spiller_lock);
        return;
    }
    g_spiller_stop = 1;
    pthread_cond_signal(&g_spiller_cond);
    pthread_mutex_unlock(&g_spiller_lock);
    pthread_join(g_spiller, NULL);
    atomic_store(&g_spiller_pid, 0);
}

/* fork(2) under a held g_lock would leave the child's copy locked forever. */
static void atfork_prepare(void)
{
    stop_spiller();
    pthread_mutex_lock(&g_lock);
}
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

static void reset_spill_file(void);

/* The child owns none of the parent's events: it keeps the registries (handles stay valid) but
 * starts with empty buffers, so its recording never repeats the parent's events as its own. */
static void atfork_child(void)
{
    thread_buffer* self = t_buffer;
    thread_buffer* b = g_threads;
    while (b) {
        thread_buffer* next = b->next;
        free_chunks(b);
        if (b != self) {
            free(b->owed);
            free(b);
        }
        b = next;
    }
    g_threads = NULL;
    while (g_spare_count > 0) /* the parent's; the child's budget starts at 0 */
        chunk_unmap(g_spare[--g_spare_count]);
    pthread_mutex_init(&g_spare_lock, NULL);
    free_named(g_thread_names);
    g_thread_names = NULL;
    atomic_store(&g_allocated, 0);
    atomic_store(&g_lost, 0);
    atomic_store(&g_flushed, 0);
    g_pid = getpid();
    reset_spill_file();
    if (g_use_tsc)
        read_anchor(&g_anchor_tsc, &g_anchor_ns);
    if (self) {
        atomic_store(&self->head, NULL);
        self->tail = NULL;
        self->tail_used = 0;
        self->tail_events_base = 0;
        self->limit = 0;
        self->full = 0;
        self->wrapped = 0;
        self->depth = 0;
        self->owed_len = 0;
        self->owed_total = 0;
        atomic_store(&self->events, 0);
        atomic_store(&self->dropped, 0);
        atomic_store(&self->discarded, 0);
        self->spill_chunk = NULL;
        self->spill_off = 0;
        self->tid = os_tid();
        self->index = ++g_thread_index;
        self->next_seq = 0;
        self->next = NULL;
        g_threads = self;
    }
    pthread_mutex_init(&g_lock, NULL);
    pthread_mutex_init(&g_spiller_lock, NULL);
    pthread_cond_init(&g_spiller_cond, NULL);
}

EXPORT int autonvtx_recorder_flush(const char* path, uint64_t out[3]);
static void finish_spill_file(void);

static __attribute__((constructor)) void on_load(void)
{
    g_pid = getpid();
    configure();
    choose_clock();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static __attribute__((destructor)) void on_unload(void)
{
    if (atomic_load(&g_attached) && g_record_dir[0])
        finish_spill_file();
}

/* ---- the injection entry point ---- */

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks* etbl;
    client_tables t = { NULL, 0, NULL, 0 };
    if (!get_export_table)
        return 0;
    etbl = (const NvtxExportTableCallbacks*)get_export_table(NVTX_ETID_CALLBACKS);
    if (!etbl || etbl->struct_size < sizeof(NvtxExportTableCallbacks) || !etbl->GetModuleFunctionTable)
        return 0;
    if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t.core, &t.core_size) || !t.core)
        return 0;
    if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t.core2, &t.core2_size))
        t.core2 = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_client_count < MAX_CLIENTS)
        g_clients[g_client_count++] = t;
    install(&t, atomic_load(&g_mode_noop));
    pthread_mutex_unlock(&g_lock);
    atomic_store(&g_attached, 1);
    if (g_record_dir[0] && !g_keep_last)
        ensure_spiller();
    return 1;
}

/* ---- control API (ctypes) ---- */

EXPORT void autonvtx_recorder_set_mode(int noop)
{
    int i;
    pthread_mutex_lock(&g_lock);
    atomic_store(&g_mode_noop, noop != 0);
    for (i = 0; i < g_client_count; ++i)
        install(&g_clients[i], noop != 0);
    pthread_mutex_unlock(&g_lock);
}

EXPORT int autonvtx_recorder_mode(void) { return atomic_load(&g_mode_noop); }
/* 1 when events are stamped with the TSC (converted at flush), 0 with clock_gettime. */
EXPORT int autonvtx_recorder_uses_tsc(void) { return g_use_tsc; }
EXPORT int autonvtx_recorder_is_attached(void) { return atomic_load(&g_attached); }

/* out: events recorded, events dropped, bytes of committed records, bytes of chunks allocated. */
EXPORT void autonvtx_recorder_stats(uint64_t out[4])
{
    thread_buffer* b;
    uint64_t events = 0, dropped = atomic_load(&g_lost), used = 0;
    pthread_mutex_lock(&g_lock);
    for (b = g_threads; b; b = b->next) {
        chunk* c;
        events += atomic_load_explicit(&b->events, memory_order_relaxed);
        dropped += atomic_load_explicit(&b->dropped, memory_order_relaxed);
        for (c = atomic_load_explicit(&b->head, memory_order_acquire); c;
             c = atomic_load_explicit(&c->next, memory_order_acquire))
            used += atomic_load_explicit(&c->used, memory_order_acquire);
    }
    pthread_mutex_unlock(&g_lock);
    out[0] = events;
    out[1] = dropped;
    out[2] = used;
    out[3] = atomic_load(&g_allocated);
}

EXPORT uint64_t autonvtx_recorder_events(void)
{
    uint64_t s[4];
    autonvtx_recorder_stats(s);
    return s[0];
}

/* ---- writing the recording: spills to the per-process file, explicit flushes ---- */

#define WRITE_BUFFER (1u << 20)

typedef struct writer {
    int fd;
    char* buf; /* WRITE_BUFFER bytes */
    size_t len;
    uint64_t bytes;
    int failed;  /* the errno of the first failed write (ENOSPC, ...), else 0 */
} writer;

static char g_write_buffer[WRITE_BUFFER]; /* writers run under g_lock, one at a time */

static void drain(writer* w)
{
    size_t done = 0;
    while (done < w->len && !w->failed) {
        ssize_t k = write(w->fd, w->buf + done, w->len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->failed = k < 0 && errno ? errno : EIO;
        else
            done += (size_t)k;
    }
    w->len = 0;
}

static void put(writer* w, const void* p, size_t n)
{
    const char* s = p;
    w->bytes += n;
    while (n) {
        size_t take = WRITE_BUFFER - w->len < n ? WRITE_BUFFER - w->len : n;
        memcpy(w->buf + w->len, s, take);
        w->len += take;
        s += take;
        n -= take;
        if (w->len == WRITE_BUFFER)
            drain(w);
    }
}

static void put_u32(writer* w, uint32_t v) { put(w, &v, 4); }
static void put_u64(writer* w, uint64_t v) { put(w, &v, 8); }

static void pad(writer* w, size_t n)
{
    static const char zeros[8] = { 0 };
    put(w, zeros, ANR_ALIGN8(n) - n);
}

static void section(writer* w, uint32_t tag, uint64_t length)
{
    put_u32(w, tag);
    put_u32(w, 0);
    put_u64(w, length);
}

/* What of the registries a file already holds (the live spill file, or one explicit flush). */
typedef struct file_cursor {
    uint32_t domains;           /* domains with an id up to this are written */
    string_entry* last_string;  /* strings up to this one are written */
    named_entry* categories;    /* the category list's head when last written */
    named_entry* thread_names;  /* the thread-name list's head when last written */
    int last_final;             /* the last SPILL section written was a final one */
} file_cursor;

/* The live file $AUTONVTX_RECORD_DIR/<pid>.anr, under g_lock: the process that created it (0:
   none yet), and which file it is. No descriptor is kept between writes (see open_live_file). */
static pid_t g_spill_pid;
static dev_t g_spill_dev;
static ino_t g_spill_ino;
static file_cursor g_spill_cursor;

static void reset_spill_file(void)
{
    g_spill_pid = 0; /* a fork child, or a new directory: the next write creates its own */
    memset(&g_spill_cursor, 0, sizeof(g_spill_cursor));
}

static size_t read_cmdline(char* buf, size_t cap)
{
    size_t n = 0;
    FILE* f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return 0;
    n = fread(buf, 1, cap, f);
    fclose(f);
    while (n > 0 && buf[n - 1] == '\0')
        --n;
    return n;
}

static int64_t realtime_offset(void)
{
    struct timespec mono, real;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll
         + ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
}

static void write_header(writer* w)
{
    static char cmdline[65536];
    size_t cmd_len = read_cmdline(cmdline, sizeof(cmdline));
    put(w, ANR_MAGIC, ANR_MAGIC_BYTES);
    put_u32(w, ANR_VERSION);
    put_u32(w, ANR_HEADER_SIZE);
    put_u32(w, (uint32_t)getpid());
    put_u32(w, (uint32_t)getppid());
    put_u64(w, now_ns());
    put_u64(w, (uint64_t)realtime_offset());
    put_u64(w, 0);
    put_u64(w, 0);
    put_u64(w, 0);
    section(w, ANR_T_CMDLINE, ANR_ALIGN8(cmd_len));
    put(w, cmdline, cmd_len);
    pad(w, cmd_len);
}

static void write_domains(writer* w, file_cursor* cur)
{
    domain_entry* d;
    uint64_t len = 0;
    for (d = g_domains; d && d->id > cur->domains; d = d->next)
        len += 8 + ANR_ALIGN8(strlen(d->name));
    if (len == 0)
        return;
    section(w, ANR_T_DOMAINS, len);
    for (d = g_domains; d && d->id > cur->domains; d = d->next) {
        size_t n = strlen(d->name);
        put_u32(w, d->id);
        put_u32(w, (uint32_t)n);
        put(w, d->name, n);
        pad(w, n);
    }
    cur->domains = g_domain_count;
}

static void write_strings(writer* w, file_cursor* cur)
{
    string_entry* first = cur->last_string ? cur->last_string->next_in_order : g_strings_first;
    string_entry* s;
    uint64_t len = 0;
    for (s = first; s; s = s->next_in_order)
        len += 16 + ANR_ALIGN8(s->len);
    if (len == 0)
        return;
    section(w, ANR_T_STRINGS, len);
    for (s = first; s; s = s->next_in_order) {
        put_u32(w, s->id);
        put_u32(w, s->domain);
        put_u32(w, s->len);
        put_u32(w, 0);
        put(w, s->text, s->len);
        pad(w, s->len);
    }
    cur->last_string = g_strings_last;
}

/* Categories (domain, id, length, 0, name) or thread names (tid, length, name) added since `upto`
   was the list's head. Lists are newest first; readers let the last entry win: oldest first. */
static void write_named(writer* w, uint32_t tag, named_entry* list, named_entry* upto)
{
    size_t count = 0, i = 0;
    uint64_t len = 0;
    int is_category = tag == ANR_T_CATEGORIES;
    named_entry *e, **all;
    for (e = list; e && e != upto; e = e->next, ++count)
        len += (is_category ? 16 : 8) + ANR_ALIGN8(strlen(e->name));
    if (count == 0 || !(all = malloc(count * sizeof(*all))))
        return;
    section(w, tag, len);
    for (e = list; e && e != upto; e = e->next)
        all[i++] = e;
    while (count-- > 0) {
        size_t n = strlen(all[count]->name);
        put_u32(w, all[count]->a);
        if (is_category)
            put_u32(w, all[count]->b);
        put_u32(w, (uint32_t)n);
        if (is_category)
            put_u32(w, 0);
        put(w, all[count]->name, n);
        pad(w, n);
    }
    free(all);
}

static void write_registries(writer* w, file_cursor* cur)
{
    write_domains(w, cur);
    write_strings(w, cur);
    write_named(w, ANR_T_CATEGORIES, g_categories, cur->categories);
    cur->categories = g_categories;
    write_named(w, ANR_T_THREAD_NAMES, g_thread_names, cur->thread_names);
    cur->thread_names = g_thread_names;
}

/* Writes `n` bytes of committed records, their timestamps converted to CLOCK_MONOTONIC ns. */
static void put_events(writer* w, const ts_convert* conv, const char* data, size_t n)
{
    static char copy[256 * 1024]; /* writers hold g_lock; longer than any record */
    size_t done = 0;
    if (!conv->on) {
        put(w, data, n);
        return;
    }
    while (done < n) {
        size_t take = n - done < sizeof(copy) ? n - done : sizeof(copy);
        size_t pos = 0;
        memcpy(copy, data + done, take);
        while (pos < take) {
            size_t size = anr_record_size(copy + pos, take - pos);
            uint64_t ts;
            if (size == 0)
                break;
            memcpy(&ts, copy + pos + 8, 8);
            ts = convert_ts(conv, ts);
            memcpy(copy + pos + 8, &ts, 8);
            pos += size;
        }
        if (pos == 0) { /* a record that does not fit the copy (none is that long) */
            w->failed = EIO;
            return;
        }
        put(w, copy, pos);
        done += pos;
    }
}

/* Where a thread's unwritten events start and end: from (first, from) to (last, last_used). */
typedef struct span {
    chunk* first;
    size_t from;
    chunk* last;
    size_t last_used;
    uint64_t bytes;
} span;

static span thread_span(thread_buffer* b, int live)
{
    span s = { NULL, 0, NULL, 0, 0 };
    chunk* c;
    s.first = live && b->spill_chunk ? b->spill_chunk : atomic_load_explicit(&b->head, memory_order_acquire);
    s.from = live && b->spill_chunk ? b->spill_off : 0;
    /* Committed lengths, read once here and reused when writing: the owner may append since. */
    for (c = s.first; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        size_t used = atomic_load_explicit(&c->used, memory_order_acquire);
        s.bytes += used - (c == s.first ? s.from : 0);
        s.last = c;
        s.last_used = used;
    }
    return s;
}

/* The spill file has what the last write took (written_chunk, written_used): chunks before its
   last one are final, so unmapped. With `failed`, the file does not have it: all is kept. */
static void release_written(int failed)
{
    thread_buffer* b;
    for (b = g_threads; b; b = b->next) {
        chunk* c = atomic_load_explicit(&b->head, memory_order_acquire);
        if (!b->written_chunk)
            continue;
        while (!failed && c && c != b->written_chunk) {
            chunk* next = atomic_load_explicit(&c->next, memory_order_acquire);
            atomic_store_explicit(&b->head, next, memory_order_release);
            spare_give(c);
            c = next;
        }
        if (!failed) {
            b->spill_chunk = b->written_chunk;
            b->spill_off = b->written_used;
        }
        b->written_chunk = NULL;
    }
}

static void write_thread(writer* w, const ts_convert* conv, thread_buffer* b, int live)
{
    span s = thread_span(b, live);
    size_t name_len = strnlen(b->name, sizeof(b->name));
    chunk* c;
    if (s.bytes == 0)
        return;
    section(w, ANR_T_THREAD, ANR_THREAD_HEAD_BYTES + ANR_ALIGN8(name_len) + s.bytes);
    put_u32(w, b->tid);
    put_u32(w, b->index);
    put_u64(w, atomic_load_explicit(&b->dropped, memory_order_relaxed));
    put_u64(w, atomic_load_explicit(&b->events, memory_order_relaxed));
    put_u32(w, (uint32_t)name_len);
    put_u32(w, b->wrapped ? (uint32_t)ANR_THREAD_WRAPPED : 0u);
    put(w, b->name, name_len);
    pad(w, name_len);
    for (c = s.first; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        size_t from = c == s.first ? s.from : 0;
        size_t to = c == s.last ? s.last_used : atomic_load_explicit(&c->used, memory_order_acquire);
        put_events(w, conv, c->data + from, to - from);
        if (c == s.last)
            break;
    }
    if (live) { /* released once the file has them (spill_locked) */
        b->written_chunk = s.last;
        b->written_used = s.last_used;
    }
}

static int has_unwritten_events(void)
{
    thread_buffer* b;
    for (b = g_threads; b; b = b->next)
        if (thread_span(b, 1).bytes)
            return 1;
    return 0;
}

static int has_unwritten(const file_cursor* cur)
{
    return g_domain_count != cur->domains || g_strings_last != cur->last_string
        || g_categories != cur->categories || g_thread_names != cur->thread_names
        || has_unwritten_events();
}

/* Registries, threads' events and a SPILL section: (ns, realtime offset, events, dropped,
   discarded, final). out: events, dropped. */
static void write_spill(writer* w, file_cursor* cur, int live, int final, uint64_t out[2])
{
    thread_buffer* b;
    uint64_t spill_ns = now_ns(), spill_tsc = 0, events = 0, dropped = atomic_load(&g_lost), discarded = 0;
    ts_convert conv;
    if (g_use_tsc)
        read_anchor(&spill_tsc, &spill_ns);
    conv = conversion_at(spill_tsc, spill_ns);
    write_registries(w, cur);
    for (b = g_threads; b; b = b->next) {
        write_thread(w, &conv, b, live);
        events += atomic_load_explicit(&b->events, memory_order_relaxed);
        dropped += atomic_load_explicit(&b->dropped, memory_order_relaxed);
        discarded += atomic_load_explicit(&b->discarded, memory_order_relaxed);
    }
    section(w, ANR_T_SPILL, ANR_SPILL_BYTES);
    put_u64(w, spill_ns);
    put_u64(w, (uint64_t)realtime_offset());
    put_u64(w, events);
    put_u64(w, dropped);
    put_u64(w, discarded);
    put_u32(w, final ? 1u : 0u);
    put_u32(w, 0);
    cur->last_final = final;
    if (out) {
        out[0] = events;
        out[1] = dropped;
    }
}

static int spill_path(char* out, size_t cap)
{
    return g_record_dir[0] && (size_t)snprintf(out, cap, "%s/%d.anr", g_record_dir, (int)g_pid) < cap;
}

/*
 * The live file, opened for one write: a program may close descriptors it did not open (a daemon
 * closes them all) and open its own files, which then get the same numbers, so no descriptor of
 * ours outlives a write. Created (with its header) by the process's first write; later ones open
 * it by path, and only if it is still the file created: the same device and inode. Returns the
 * descriptor (also in w->fd) and the file's size before this write, or -errno.
 */
static int open_live_file(writer* w, off_t* size)
{
    char path[4200];
    struct stat st;
    int fresh = g_spill_pid != g_pid;
    int fd;
    if (!spill_path(path, sizeof(path)))
        return -EINVAL;
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | (fresh ? O_CREAT | O_TRUNC : 0), 0666);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || (!fresh && (st.st_dev != g_spill_dev || st.st_ino != g_spill_ino))) {
        int error = errno && fresh ? errno : ESTALE; /* replaced: what it held is gone */
        close(fd);
        return -error;
    }
    w->fd = fd;
    *size = fresh ? 0 : st.st_size;
    if (fresh) {
        g_spill_pid = g_pid;
        g_spill_dev = st.st_dev;
        g_spill_ino = st.st_ino;
        memset(&g_spill_cursor, 0, sizeof(g_spill_cursor));
        write_header(w);
    }
    return fd;
}

/*
 * Appends what is new to the live file. Under g_lock. A write that fails (a full disk, the
 * directory removed) leaves the file as it was (cut back to its size before) and the events in
 * memory, for the next write to try again; returns -errno.
 */
static int spill_locked(int final, uint64_t out[3])
{
    writer w = { -1, g_write_buffer, 0, 0, 0 };
    file_cursor before = g_spill_cursor;
    off_t size = 0;
    int fd;
    /* Nothing new: not even opened. No event yet: no file yet (a process killed before its
       first event is named missing, whatever the timing of its first periodic write). */
    if (!final && (g_spill_pid != g_pid ? !has_unwritten_events() : !has_unwritten(&g_spill_cursor)))
        return 0;
    fd = open_live_file(&w, &size);
    if (fd < 0)
        return fd;
    write_spill(&w, &g_spill_cursor, 1, final, out);
    drain(&w);
    release_written(w.failed);
    if (w.failed) {
        g_spill_cursor = before;
        if (ftruncate(fd, size) != 0 || size == 0)
            g_spill_pid = 0; /* created again, header first, by the next write */
    }
    if (final)
        spare_drain();
    if (out)
        out[2] = (uint64_t)lseek(fd, 0, SEEK_END);
    close(fd);
    return -w.failed;
}

static void spill_periodic(void)
{
    pthread_mutex_lock(&g_lock);
    if (atomic_load(&g_attached))
        spill_locked(0, NULL);
    pthread_mutex_unlock(&g_lock);
}

/* At unload: the live file ends with a final SPILL section, unless it already does. */
static void finish_spill_file(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_keep_last || g_spill_pid != g_pid || !g_spill_cursor.last_final
        || has_unwritten(&g_spill_cursor))
        spill_locked(1, NULL);
    pthread_mutex_unlock(&g_lock);
}

/* A whole recording from memory into a new file (no live file in this process). */
static int write_whole(int fd, uint64_t out[3])
{
    writer w = { fd, g_write_buffer, 0, 0, 0 };
    file_cursor cur;
    memset(&cur, 0, sizeof(cur));
    write_header(&w);
    write_spill(&w, &cur, 0, 1, out);
    drain(&w);
    if (out)
        out[2] = w.bytes;
    return -w.failed;
}

/* The live file so far, then a final SPILL section, into a new file. */
static int copy_live(int fd, uint64_t out[3])
{
    writer w = { fd, g_write_buffer, 0, 0, 0 };
    file_cursor cur = g_spill_cursor;
    off_t at = 0;
    int rc = spill_locked(0, NULL);
    int in;
    char path[4200];
    if (rc != 0 || !spill_path(path, sizeof(path)) || (in = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return rc ? rc : -errno;
    for (;;) {
        ssize_t k = pread(in, g_write_buffer, WRITE_BUFFER, at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        w.len = (size_t)k;
        w.bytes += (uint64_t)k;
        at += k;
        drain(&w);
    }
    close(in);
    cur = g_spill_cursor;
    write_spill(&w, &cur, 0, 1, out);
    drain(&w);
    if (out)
        out[2] = w.bytes;
    return -w.failed;
}

static int write_to_new_file(const char* path, uint64_t out[3])
{
    char tmp[4200];
    int fd, rc;
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return -errno;
    if (g_spill_pid == g_pid)
        rc = copy_live(fd, out);
    else
        rc = write_whole(fd, out);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/*
 * Writes the recording. A NULL or empty path means the live file $AUTONVTX_RECORD_DIR/<pid>.anr:
 * what it lacks is appended, with a final SPILL section. Another path gets a whole recording,
 * written atomically (path.tmp, then rename). Returns 0, or a negative errno.
 * out: events, dropped, bytes of the file.
 */
EXPORT int autonvtx_recorder_flush(const char* path, uint64_t out[3])
{
    char live[4200];
    int rc;
    const char* dir = getenv("AUTONVTX_RECORD_DIR");
    if ((!path || !*path) && (!dir || !*dir))
        return -EINVAL;
    pthread_mutex_lock(&g_lock);
    if (dir && *dir && strcmp(dir, g_record_dir) != 0 && strlen(dir) < sizeof(g_record_dir) - 32) {
        strcpy(g_record_dir, dir); /* set after the library loaded: the file goes there */
        reset_spill_file();
    }
    if (!path || !*path || (spill_path(live, sizeof(live)) && strcmp(path, live) == 0))
        rc = spill_locked(1, out);
    else
        rc = write_to_new_file(path, out);
    pthread_mutex_unlock(&g_lock);
    if (rc == 0)
        atomic_store(&g_flushed, 1);
    return rc;
}
