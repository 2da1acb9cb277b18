/* Chunks of event records and the memory budget they are taken from. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

_Atomic uint64_t g_allocated;
uint64_t g_limit = 512ull << 20;

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

void chunk_unmap(chunk* c)
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
void spare_give(chunk* c)
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
void spare_drain(void)
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

/*
 * A new chunk for an n-byte record. Memory for events is bounded by the budget, but what is kept
 * must stay true: a pop or an end (`closing`) closes a range whose push or start was kept, so when
 * the budget refuses it, it gets a small chunk past the budget, which only pops and ends may use
 * (the overshoot: the pops and ends of the ranges open at that moment, in 4 KiB chunks). Pushes,
 * starts and marks are left out instead; see owe_pop (events.c) for the pops of pushes left out.
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

__attribute__((noinline)) char* reserve_slow(thread_buffer* b, size_t n, int closing)
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
    if (g_record_dir[0] && !g_keep_last && !g_flight) /* --flight's scans keep their own pace */
        spill_nudge(c->cap);
    return c->data;
}

void free_chunks(thread_buffer* b)
{
    chunk* c = atomic_load(&b->head);
    while (c) {
        chunk* next = atomic_load(&c->next);
        chunk_unmap(c);
        c = next;
    }
}

/* In a fork child: the parent's spare chunks are not the child's (its budget starts at 0). */
void spare_reset_in_child(void)
{
    while (g_spare_count > 0)
        chunk_unmap(g_spare[--g_spare_count]);
    pthread_mutex_init(&g_spare_lock, NULL);
    atomic_store(&g_allocated, 0);
}
