/*
 * autonvtx exporter, its ctypes face: streams recordings (see export_read.c) into Chrome JSON,
 * Perfetto TracePackets and range statistics. Memory grows with nesting depth, open start/end
 * ranges, distinct names and (for the statistics' exact medians) 8 bytes per range, never with
 * the trace written. Called through ctypes by autonvtx/recorder/export.py, which writes the
 * small parts (heads, descriptors). Also here: growable bytes and interning, which all share.
 */
#include "export.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int buf_grow(buf* b, size_t n)
{
    size_t cap = b->cap ? b->cap : 4096;
    char* q;
    while (cap < b->len + n)
        cap *= 2;
    if (!(q = realloc(b->p, cap))) {
        b->failed = ENOMEM;
        return 0;
    }
    b->p = q;
    b->cap = cap;
    return 1;
}

void buf_str(buf* b, const char* s) { buf_add(b, s, strlen(s)); }

void buf_u64(buf* b, uint64_t v)
{
    char tmp[24];
    int i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_add(b, tmp + i, (size_t)(24 - i));
}

/* Nanoseconds as exact microseconds: 123456 -> 123.456 (as trace.py's _us). */
void buf_us(buf* b, uint64_t ns)
{
    char frac[4] = { (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10), (char)('0' + ns % 10), 0 };
    buf_u64(b, ns / 1000);
    buf_add(b, ".", 1);
    buf_add(b, frac, 3);
}

static uint64_t hash_bytes(uint32_t domain, const char* s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ domain;
    size_t i;
    for (i = 0; i < n; ++i)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int interner_grow(interner* t)
{
    size_t n = t->nslots ? t->nslots * 2 : 1024, i;
    uint32_t* slots = calloc(n, sizeof(*slots));
    if (!slots)
        return 0;
    for (i = 0; i < t->count; ++i) {
        size_t j = t->items[i].hash & (n - 1);
        while (slots[j])
            j = (j + 1) & (n - 1);
        slots[j] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 1;
}

uint32_t intern(interner* t, uint32_t domain, const char* s, size_t n)
{
    uint64_t h = hash_bytes(domain, s, n);
    size_t j;
    name* e;
    if ((t->count + 1) * 2 > t->nslots && !interner_grow(t))
        return 0;
    for (j = h & (t->nslots - 1); t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
        e = &t->items[t->slots[j] - 1];
        if (e->hash == h && e->domain == domain && e->len == n && memcmp(e->text, s, n) == 0)
            return t->slots[j] - 1;
    }
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        name* items = realloc(t->items, cap * sizeof(*items));
        if (!items)
            return 0;
        t->items = items;
        t->cap = cap;
    }
    e = &t->items[t->count];
    memset(e, 0, sizeof(*e));
    e->domain = domain;
    e->len = (uint32_t)n;
    e->hash = h;
    e->text = malloc(n + 1);
    if (e->text) {
        memcpy(e->text, s, n);
        e->text[n] = '\0';
    }
    t->slots[j] = (uint32_t)t->count + 1;
    return (uint32_t)t->count++;
}

void interner_free(interner* t)
{
    size_t i;
    for (i = 0; i < t->count; ++i) {
        free(t->items[i].text);
        free(t->items[i].json);
    }
    free(t->items);
    free(t->slots);
}

void flush_out(exporter* x, int force)
{
    if (x->out.len && (force || x->out.len >= (1u << 20))) {
        FILE* f = x->json ? x->json : x->pftrace;
        if (f && fwrite(x->out.p, 1, x->out.len, f) != x->out.len)
            x->out.failed = errno ? errno : EIO; /* ENOSPC, EFBIG, ...: said as such */
        x->out.len = 0;
    }
}

static size_t u64map_slot(const u64map* m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t j = (size_t)(h ^ (h >> 31)) & (m->nslots - 1);
    while (m->values[j] != NONE32 && m->keys[j] != key)
        j = (j + 1) & (m->nslots - 1);
    return j;
}

uint32_t u64map_get(const u64map* m, uint64_t key)
{
    return m->nslots ? m->values[u64map_slot(m, key)] : NONE32;
}

static int u64map_grow(u64map* m)
{
    u64map bigger = { NULL, NULL, m->count, m->nslots ? m->nslots * 2 : 64 };
    size_t i;
    bigger.keys = malloc(bigger.nslots * sizeof(*bigger.keys));
    bigger.values = malloc(bigger.nslots * sizeof(*bigger.values));
    if (!bigger.keys || !bigger.values) {
        u64map_free(&bigger);
        return 0;
    }
    memset(bigger.values, 0xFF, bigger.nslots * sizeof(*bigger.values));
    for (i = 0; i < m->nslots; ++i) {
        if (m->values[i] != NONE32) {
            size_t j = u64map_slot(&bigger, m->keys[i]);
            bigger.keys[j] = m->keys[i];
            bigger.values[j] = m->values[i];
        }
    }
    u64map_free(m);
    *m = bigger;
    return 1;
}

int u64map_put(u64map* m, uint64_t key, uint32_t value)
{
    size_t j;
    if ((m->count + 1) * 2 > m->nslots && !u64map_grow(m))
        return 0;
    j = u64map_slot(m, key);
    m->count += m->values[j] == NONE32;
    m->keys[j] = key;
    m->values[j] = value;
    return 1;
}

void u64map_free(u64map* m)
{
    free(m->keys);
    free(m->values);
    m->keys = NULL;
    m->values = NULL;
    m->count = m->nslots = 0;
}

int grow_map(uint32_t** map, size_t* cap, size_t need)
{
    size_t n = *cap ? *cap : 64, i;
    uint32_t* m;
    if (need < *cap)
        return 1;
    while (n <= need)
        n *= 2;
    if (!(m = realloc(*map, n * sizeof(*m))))
        return 0;
    for (i = *cap; i < n; ++i)
        m[i] = NONE32;
    *map = m;
    *cap = n;
    return 1;
}

/* ---- the ctypes face ---- */

static void reset_file_state(exporter* x)
{
    size_t i;
    for (i = 0; i < x->nthreads; ++i) {
        free(x->threads[i].stack);
        free(x->threads[i].seen_names);
        free(x->threads[i].seen_cats);
        u64map_free(&x->threads[i].tops);
        u64map_free(&x->threads[i].instances);
        u64map_free(&x->threads[i].open_rows);
    }
    free(x->threads);
    u64map_free(&x->thread_at);
    u64map_free(&x->cats);
    free(x->domain_map);
    free(x->string_map);
    x->threads = NULL;
    x->nthreads = 0;
    x->domain_map = x->string_map = NULL;
    x->domain_map_cap = x->string_map_cap = 0;
    x->nwindows = 0;
}

/* json_path / pftrace_path: files to append events to (either may be NULL); stats_mode: 0, or
   STATS_FLAT / STATS_TREE, | STATS_BY_THREAD; skip_first: instances of each row left out. */
EXPORT void* autonvtx_export_new(const char* json_path, const char* pftrace_path, int stats_mode,
                                 uint64_t skip_first)
{
    exporter* x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->stats_mode = stats_mode;
    x->skip_first = skip_first < NONE32 - 1 ? skip_first : NONE32 - 1; /* counted in 32 bits */
    if ((json_path && !(x->json = fopen(json_path, "ab")))
        || (pftrace_path && !(x->pftrace = fopen(pftrace_path, "ab")))) {
        if (x->json)
            fclose(x->json);
        free(x);
        return NULL;
    }
    intern(&x->domains, 0, "", 0); /* global domain 0: the core domain */
    return x;
}

/* Streams one recording. group: its statistics group (unless by thread). info out: ranges,
   marks, open ranges, unmatched pops, first ts, last ts, flush ns, ended normally. */
EXPORT int autonvtx_export_file(void* handle, const char* path, uint64_t group, uint64_t info[8])
{
    exporter* x = handle;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t i;
    void* map;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)ANR_HEADER_SIZE) {
        close(fd);
        return -EILSEQ;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -errno;
    if (memcmp(map, ANR_MAGIC, ANR_MAGIC_BYTES) != 0 || load32((const char*)map + 8) != ANR_VERSION
        || load32((const char*)map + 12) < ANR_HEADER_SIZE) {
        munmap(map, (size_t)st.st_size);
        return -EILSEQ;
    }
    madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
    memset(x->info, 0, sizeof(x->info));
    x->data = map;
    x->size = (size_t)st.st_size;
    x->pid = load32(x->data + 16);
    x->group = group;
    x->flush_ns = load64(x->data + 24);
    x->ended_normally = 0;
    x->outside = 0;
    x->corrupt_records = x->skipped_bytes = x->bad_entries = x->impossible_times = 0;
    x->latest_write_ns = 0;
    x->cut_write = 0;
    x->cut_kept_events = x->cut_lost_bytes = 0;
    find_windows(x);
    read_sections(x);
    x->info[I_FIRST] = UINT64_MAX;
    for (i = 0; i < x->nthreads; ++i) {
        if (x->threads[i].last > x->flush_ns)
            x->flush_ns = x->threads[i].last;
        if (x->threads[i].first < x->info[I_FIRST])
            x->info[I_FIRST] = x->threads[i].first;
        if (x->threads[i].last > x->info[I_LAST])
            x->info[I_LAST] = x->threads[i].last;
        if (!x->threads[i].wrapped)
            x->info[I_UNMATCHED] += x->threads[i].unmatched;
    }
    close_open(x);
    for (i = 0; i < x->nthreads; ++i) /* the time the counted instances span: % wall's denominator */
        if (x->threads[i].span_first != UINT64_MAX)
            stats_span(&x->st, stats_group(x, &x->threads[i]), x->threads[i].span_first, x->threads[i].span_last);
    x->info[I_FLUSH] = x->flush_ns;
    x->info[I_ENDED] = (uint64_t)x->ended_normally;
    if (info)
        memcpy(info, x->info, sizeof(x->info));
    munmap(map, x->size);
    x->data = NULL;
    reset_file_state(x);
    flush_out(x, 1);
    return -x->out.failed;
}

/* Events of the last file streamed that were left out: they began outside its capture windows. */
EXPORT uint64_t autonvtx_export_outside(void* handle)
{
    return ((exporter*)handle)->outside;
}

/* What the last file streamed lost to damage: out = records where a section stopped being
   readable, bytes skipped, registry entries rejected, records with impossible times; then of
   a last write the process's end cut short: the events of it kept, the bytes of it lost.
   Returns nonzero when any of it happened. */
EXPORT uint64_t autonvtx_export_damage(void* handle, uint64_t out[6])
{
    exporter* x = handle;
    out[0] = x->corrupt_records;
    out[1] = x->skipped_bytes;
    out[2] = x->bad_entries;
    out[3] = x->impossible_times;
    out[4] = x->cut_kept_events;
    out[5] = x->cut_lost_bytes;
    return out[0] + out[1] + out[2] + out[3] + (uint64_t)x->cut_write;
}

EXPORT int autonvtx_export_close(void* handle)
{
    exporter* x = handle;
    int rc = 0;
    flush_out(x, 1);
    if (x->out.failed)
        rc = -x->out.failed;
    if (x->json && fclose(x->json) != 0)
        rc = -errno;
    if (x->pftrace && fclose(x->pftrace) != 0)
        rc = -errno;
    x->json = x->pftrace = NULL;
    return rc;
}

EXPORT void autonvtx_export_free(void* handle)
{
    exporter* x = handle;
    if (!x)
        return;
    autonvtx_export_close(x);
    reset_file_state(x);
    free(x->windows);
    stats_free(&x->st);
    free(x->folded);
    interner_free(&x->names);
    interner_free(&x->domains);
    interner_free(&x->categories);
    free(x->out.p);
    free(x->packet.p);
    free(x->event.p);
    free(x->scratch.p);
    free(x);
}
