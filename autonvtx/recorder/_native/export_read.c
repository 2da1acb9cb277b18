/* The exporter's reader: walks a recording's sections, decodes its records, pairs pushes with
   pops and starts with ends, and hands each finished range to the writers and statistics. */
#include "export.h"

#include <errno.h>

/* ---- reading one file ---- */

static thread_state* thread_of(exporter* x, uint32_t index, uint32_t tid, uint32_t flags)
{
    size_t i;
    thread_state* t;
    for (i = 0; i < x->nthreads; ++i) /* few threads; a section holds many events */
        if (x->threads[i].index == index) {
            x->threads[i].wrapped |= (int)(flags & 1);
            return &x->threads[i];
        }
    t = realloc(x->threads, (x->nthreads + 1) * sizeof(*t));
    if (!t)
        return NULL;
    x->threads = t;
    t = &t[x->nthreads++];
    memset(t, 0, sizeof(*t));
    t->index = index;
    t->tid = tid;
    t->first = UINT64_MAX;
    t->wrapped = (int)(flags & 1);
    return t;
}

/* Whether an event at `ts` is exported: always, unless the file opened capture windows. */
static int in_window(const exporter* x, uint64_t ts)
{
    size_t i;
    if (x->nwindows == 0)
        return 1;
    for (i = 0; i < x->nwindows; ++i)
        if (x->windows[i][0] <= ts && ts <= x->windows[i][1])
            return 1;
    return 0;
}

/* A push/pop range ends: statistics (self time, tree rows), JSON, Perfetto. */
static void range_ended(exporter* x, thread_state* t, opened* o, uint64_t end, int is_open)
{
    uint64_t duration = end > o->start ? end - o->start : 0;
    if (t->depth > 0) /* the range that encloses it (any domain) spent this time in it */
        t->stack[t->depth - 1].child += duration;
    if (o->outside) {
        x->outside++;
        return;
    }
    if (x->stats_mode) {
        int64_t r = o->row >= 0 ? o->row : stats_row(&x->st, stats_group(x, t), -1, stat_name(x, o->name), 0);
        count_instance(x, t, r, duration, duration > o->child ? duration - o->child : 0, is_open);
    }
    if (x->json)
        json_range(x, t->tid, o, end, is_open);
    if (x->pftrace)
        pf_event(x, t, SLICE_END, end, 0, o, is_open);
    x->info[I_RANGES]++;
    x->info[I_OPEN] += is_open != 0;
}

static void on_push(exporter* x, thread_state* t, opened* o)
{
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        opened* s = realloc(t->stack, cap * sizeof(*s));
        if (!s)
            return;
        t->stack = s;
        t->cap = cap;
    }
    o->row = -1;
    o->outside = !in_window(x, o->start);
    if (x->stats_mode & STATS_TREE) {
        int64_t parent = t->depth ? t->stack[t->depth - 1].row : -1;
        o->row = stats_row(&x->st, stats_group(x, t), parent, stat_name(x, o->name), (uint32_t)t->depth);
    }
    t->stack[t->depth++] = *o;
    if (x->pftrace && !o->outside)
        pf_event(x, t, SLICE_BEGIN, o->start, 0, o, 0);
}

static void on_pop(exporter* x, thread_state* t, uint32_t domain, uint64_t ts)
{
    size_t i = t->depth;
    opened o;
    while (i > 0 && t->stack[i - 1].domain != domain) /* stacks are per domain in NVTX */
        --i;
    if (i == 0) {
        t->unmatched++;
        return;
    }
    o = t->stack[i - 1];
    memmove(&t->stack[i - 1], &t->stack[i], (t->depth - i) * sizeof(opened));
    t->depth--;
    range_ended(x, t, &o, ts, 0);
}

static void start_ended(exporter* x, started* s, uint32_t end_tid, uint64_t end, int is_open)
{
    uint64_t duration = end > s->range.start ? end - s->range.start : 0;
    thread_state* t = thread_of(x, s->index, s->tid, 0);
    if (!t)
        return;
    if (!in_window(x, s->range.start)) {
        x->outside++;
        return;
    }
    if (x->stats_mode) {
        int64_t r = stats_row(&x->st, stats_group(x, t), -1, stat_name(x, s->range.name), 0);
        count_instance(x, t, r, duration, duration, is_open);
    }
    if (x->json)
        json_async(x, s->tid, end_tid, &s->range, end, is_open);
    if (x->pftrace)
        pf_async(x, t, &s->range, end, is_open);
    x->info[I_RANGES]++;
    x->info[I_OPEN] += is_open != 0;
}

static void on_start(exporter* x, thread_state* t, uint64_t id, const opened* o)
{
    started* s = malloc(sizeof(*s));
    if (!s)
        return;
    s->id = id;
    s->tid = t->tid;
    s->index = t->index;
    s->range = *o;
    s->next = x->starts[id % START_BUCKETS];
    x->starts[id % START_BUCKETS] = s;
}

static void on_end(exporter* x, thread_state* t, uint64_t id, uint64_t ts)
{
    started** p = &x->starts[id % START_BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->next;
    if (!*p) {
        t->unmatched++;
        return;
    }
    {
        started* s = *p;
        *p = s->next;
        start_ended(x, s, t->tid, ts, 0);
        free(s);
    }
}

static void on_mark(exporter* x, thread_state* t, const opened* o)
{
    if (!in_window(x, o->start)) {
        x->outside++;
        return;
    }
    if (x->json)
        json_mark(x, t->tid, o);
    if (x->pftrace)
        pf_event(x, t, INSTANT, o->start, 0, o, 0);
    x->info[I_MARKS]++;
}

/* A category's global id: its registered name in the event's domain (the last one given), else
   its number as text. */
static uint32_t category_of(exporter* x, uint32_t domain, uint32_t number)
{
    size_t i = x->ncats;
    char text[16];
    while (i > 0) {
        --i;
        if (x->cats[i].domain == domain && x->cats[i].number == number)
            return x->cats[i].id;
    }
    snprintf(text, sizeof(text), "%u", number);
    return intern(&x->categories, 0, text, strlen(text));
}


/* Decodes one record at p (at most `avail` bytes) into `o`; returns its size, 0 if corrupt. */
static size_t decode(exporter* x, const char* p, size_t avail, opened* o, uint64_t* id)
{
    uint8_t kind = (uint8_t)p[0], flags = (uint8_t)p[1], ptype = (uint8_t)p[2], mkind = (uint8_t)p[3];
    size_t n = 16;
    memset(o, 0, sizeof(*o));
    o->domain = load32(p + 4);
    o->start = load64(p + 8);
    o->category = NONE32;
    if (kind == K_START || kind == K_END) {
        *id = load64(p + n);
        n += 8;
    }
    if (kind == K_POP || kind == K_END)
        return n <= avail ? n : 0;
    if (ptype) {
        o->payload_type = ptype;
        o->payload = load64(p + n);
        n += 8;
    }
    if (flags & 1) {
        o->has_color = 1;
        o->color = load32(p + n);
        n += 4;
    }
    if (flags & 2) {
        o->category = category_of(x, o->domain, load32(p + n));
        n += 4;
    }
    if (mkind == 2) {
        uint32_t s = load32(p + n);
        o->name = s < x->string_map_cap && x->string_map[s] != NONE32 ? x->string_map[s]
                : intern(&x->names, global_domain(x, o->domain), "", 0);
        n += 4;
    } else if (mkind == 1) {
        uint32_t len = load32(p + n);
        if (n + 4 + len > avail)
            return 0;
        o->name = intern(&x->names, global_domain(x, o->domain), p + n + 4, len);
        n += 4 + len;
    } else {
        o->name = intern(&x->names, global_domain(x, o->domain), "", 0);
    }
    n = ALIGN8(n);
    return n <= avail ? n : 0;
}

/* The events of one THREAD section; returns 0, or -1 if a record is corrupt. */
static int read_thread(exporter* x, const char* p, size_t n)
{
    uint32_t tid = load32(p), index = load32(p + 4), name_len = load32(p + 24), flags = load32(p + 28);
    size_t pos = 32 + ALIGN8(name_len);
    thread_state* t = thread_of(x, index, tid, flags);
    if (!t)
        return -1;
    while (pos < n) {
        opened o;
        uint64_t id = 0;
        uint8_t kind = (uint8_t)p[pos];
        size_t size = n - pos >= 16 ? decode(x, p + pos, n - pos, &o, &id) : 0;
        if (size == 0)
            return -1;
        pos += size;
        if (o.start < t->first)
            t->first = o.start;
        if (o.start > t->last)
            t->last = o.start;
        if (kind == K_PUSH)
            on_push(x, t, &o);
        else if (kind == K_POP)
            on_pop(x, t, o.domain, o.start);
        else if (kind == K_START)
            on_start(x, t, id, &o);
        else if (kind == K_END)
            on_end(x, t, id, o.start);
        else if (kind == K_MARK)
            on_mark(x, t, &o);
        else
            return -1;
    }
    return 0;
}

/* Registries: domains, strings and categories, mapped to global ids. */
static void read_registry(exporter* x, uint32_t tag, const char* p, size_t n)
{
    size_t pos = 0;
    while (pos + 8 <= n) {
        uint32_t a = load32(p + pos), b = load32(p + pos + 4);
        if (tag == T_DOMAINS) {
            if (pos + 8 + b > n || !grow_map(&x->domain_map, &x->domain_map_cap, a))
                return;
            x->domain_map[a] = intern(&x->domains, 0, p + pos + 8, b);
            pos += 8 + ALIGN8(b);
            continue;
        }
        if (pos + 16 > n)
            return;
        {
            uint32_t len = load32(p + pos + 8);
            const char* text = p + pos + 16;
            if (pos + 16 + len > n)
                return;
            if (tag == T_STRINGS && grow_map(&x->string_map, &x->string_map_cap, a)) {
                x->string_map[a] = intern(&x->names, global_domain(x, b), text, len);
            } else if (tag == T_CATEGORIES) {
                void* c = realloc(x->cats, (x->ncats + 1) * sizeof(*x->cats));
                if (c) {
                    x->cats = c;
                    x->cats[x->ncats].domain = a;
                    x->cats[x->ncats].number = b;
                    x->cats[x->ncats++].id = intern(&x->categories, 0, text, len);
                }
            }
            pos += 16 + ALIGN8(len);
        }
    }
}

/* Ranges still open when the file ends: they end at its last write, flagged open. */
void close_open(exporter* x)
{
    size_t i, b;
    for (i = 0; i < x->nthreads; ++i) {
        thread_state* t = &x->threads[i];
        while (t->depth > 0) {
            opened o = t->stack[--t->depth];
            range_ended(x, t, &o, x->flush_ns > o.start ? x->flush_ns : o.start, 1);
            if (x->flush_ns > t->last)
                t->last = x->flush_ns;
        }
    }
    for (b = 0; b < START_BUCKETS; ++b) {
        while (x->starts[b]) {
            started* s = x->starts[b];
            x->starts[b] = s->next;
            start_ended(x, s, s->tid, x->flush_ns > s->range.start ? x->flush_ns : s->range.start, 1);
            free(s);
        }
    }
}

/* Walks the sections to the file's end (a last one cut short is left out). */
int read_sections(exporter* x)
{
    size_t pos = load32(x->data + 12);
    while (pos + 16 <= x->size) {
        uint32_t tag = load32(x->data + pos);
        uint64_t len = load64(x->data + pos + 8);
        const char* body = x->data + pos + 16;
        if (tag == T_END || len > x->size - pos - 16)
            break;
        if (tag == T_THREAD && len >= 32) {
            if (read_thread(x, body, len) != 0)
                return -EILSEQ;
        } else if (tag == T_DOMAINS || tag == T_STRINGS || tag == T_CATEGORIES) {
            read_registry(x, tag, body, len);
        } else if (tag == T_SPILL && len >= 48) {
            if (load64(body) > x->flush_ns)
                x->flush_ns = load64(body);
            x->ended_normally |= load32(body + 40) != 0;
        }
        pos += 16 + len;
    }
    return 0;
}

/* ---- capture windows ---- */

static void add_window(exporter* x, uint64_t lo, uint64_t hi)
{
    if (x->nwindows == x->windows_cap) {
        size_t cap = x->windows_cap ? x->windows_cap * 2 : 8;
        void* w = realloc(x->windows, cap * sizeof(*x->windows));
        if (!w)
            return;
        x->windows = w;
        x->windows_cap = cap;
    }
    x->windows[x->nwindows][0] = lo;
    x->windows[x->nwindows][1] = hi;
    x->nwindows++;
}

/* The events of one THREAD section, looking only for the capture range's starts and ends:
   `open` holds (range id, start) of windows begun and not yet ended. */
static void scan_thread_windows(exporter* x, const char* p, size_t n, uint32_t capture,
                                uint64_t (**open)[2], size_t* nopen)
{
    size_t pos = 32 + ALIGN8(load32(p + 24)), i;
    while (pos + 16 <= n) {
        opened o;
        uint64_t id = 0;
        uint8_t kind = (uint8_t)p[pos];
        size_t size = decode(x, p + pos, n - pos, &o, &id);
        if (size == 0)
            return;
        pos += size;
        if (kind == K_START && o.name == capture) {
            void* grown = realloc(*open, (*nopen + 1) * sizeof(**open));
            if (!grown)
                return;
            *open = grown;
            (*open)[*nopen][0] = id;
            (*open)[(*nopen)++][1] = o.start;
        } else if (kind == K_END) {
            for (i = 0; i < *nopen; ++i) {
                if ((*open)[i][0] == id) {
                    add_window(x, (*open)[i][1], o.start);
                    (*open)[i][0] = (*open)[--*nopen][0];
                    (*open)[i][1] = (*open)[*nopen][1];
                    break;
                }
            }
        }
    }
}

/* Capture windows: the start/end ranges named "capture" in domain "autonvtx" (a registered
   string, opened by regions' capture windows). A first walk reads the registries; the events
   are decoded twice only when the file registered that string. A window still open at the
   file's end lasts to its end. */
void find_windows(exporter* x)
{
    size_t pos = load32(x->data + 12), i, nopen = 0;
    uint32_t domain = intern(&x->domains, 0, "autonvtx", 8), capture, s;
    uint64_t (*open)[2] = NULL;
    int registered = 0;
    capture = intern(&x->names, domain, "capture", 7);
    while (pos + 16 <= x->size) {
        uint32_t tag = load32(x->data + pos);
        uint64_t len = load64(x->data + pos + 8);
        if (tag == T_END || len > x->size - pos - 16)
            break;
        if (tag == T_DOMAINS || tag == T_STRINGS)
            read_registry(x, tag, x->data + pos + 16, len);
        pos += 16 + len;
    }
    for (s = 0; s < x->string_map_cap && !registered; ++s)
        registered = x->string_map[s] == capture;
    if (!registered)
        return;
    for (pos = load32(x->data + 12); pos + 16 <= x->size;) {
        uint32_t tag = load32(x->data + pos);
        uint64_t len = load64(x->data + pos + 8);
        if (tag == T_END || len > x->size - pos - 16)
            break;
        if (tag == T_THREAD && len >= 32)
            scan_thread_windows(x, x->data + pos + 16, len, capture, &open, &nopen);
        pos += 16 + len;
    }
    for (i = 0; i < nopen; ++i)
        add_window(x, open[i][1], UINT64_MAX);
    free(open);
}
