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
 * chunk (a ring), and the file is written at exit with the most recent events. With
 * AUTONVTX_FLIGHT_RANGE, the spiller also watches one range's instances (flight.c).
 *
 * The file format is defined in anr_format.h.
 */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

#define MAX_CLIENTS 256

typedef struct client_tables {
    NvtxFunctionTable core;
    unsigned int core_size;
    NvtxFunctionTable core2;
    unsigned int core2_size;
} client_tables;

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
thread_buffer* g_threads;
uint32_t g_thread_index;
_Atomic int g_attached;
_Atomic int g_flushed;
pid_t g_pid;
int g_keep_last;
char g_record_dir[4096];

static client_tables g_clients[MAX_CLIENTS];
static int g_client_count;
static _Atomic int g_mode_noop;

/* Writes one client's slots for the current mode. Caller holds g_lock. */
static void install_slots(const client_tables* t, int noop, const slot* slots, size_t count)
{
    size_t i;
    for (i = 0; i < count; ++i) {
        const slot* s = &slots[i];
        NvtxFunctionTable table = s->module == NVTX_CB_MODULE_CORE ? t->core : t->core2;
        unsigned int size = s->module == NVTX_CB_MODULE_CORE ? t->core_size : t->core2_size;
        /* out_size is the highest valid callback id (index 0 is the INVALID id). */
        if (table && s->id <= size && table[s->id])
            *table[s->id] = noop ? s->noop : s->record;
    }
}

static void install(const client_tables* t, int noop)
{
    install_slots(t, noop, g_event_slots, g_event_slot_count);
    install_slots(t, noop, g_registry_slots, g_registry_slot_count);
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
    flight_configure();
}

/* fork(2) under a held g_lock would leave the child's copy locked forever. */
static void atfork_prepare(void)
{
    stop_spiller();
    pthread_mutex_lock(&g_lock);
}
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

/* The child owns none of the parent's events: it keeps the registries (handles stay valid) but
 * starts with empty buffers, so its recording never repeats the parent's events as its own. */
static void atfork_child(void)
{
    thread_buffer* self = current_thread_buffer();
    thread_buffer* b = g_threads;
    while (b) {
        thread_buffer* next = b->next;
        free_chunks(b);
        flight_forget_thread(b);
        if (b != self) {
            free(b->owed);
            free(b);
        }
        b = next;
    }
    g_threads = NULL;
    spare_reset_in_child();
    free_named(g_thread_names);
    g_thread_names = NULL;
    atomic_store(&g_lost, 0);
    atomic_store(&g_flushed, 0);
    g_pid = getpid();
    spill_reset_in_child();
    flight_reset_in_child();
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
        self->written_chunk = NULL;
        self->tid = os_tid();
        self->index = ++g_thread_index;
        self->next_seq = 0;
        self->next = NULL;
        g_threads = self;
    }
    pthread_mutex_init(&g_lock, NULL);
}

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


/* ---- the run's exit status when its outputs could not be written ---- */

static int g_failure_status;

/* Runs inside exit(), after Python's own shutdown (atexit handlers, flushes, finalizers) is over:
 * the one point where the status the program ended with is known (glibc passes it to on_exit
 * handlers) and can still be changed. A program that failed keeps its own status. */
static void exit_with_failure(int status, void* arg)
{
    (void)arg;
    if (status == 0 && g_failure_status) {
        fflush(NULL);
        _exit(g_failure_status);
    }
}

/* Makes a process that would exit with 0 exit with `status` instead. 1 where that is possible
 * (glibc's on_exit), 0 where not. */
EXPORT int autonvtx_recorder_fail_exit(int status)
{
#ifdef __GLIBC__
    static int registered;
    g_failure_status = status;
    if (!registered && on_exit(exit_with_failure, NULL) == 0)
        registered = 1;
    return registered;
#else
    (void)status;
    return 0;
#endif
}
