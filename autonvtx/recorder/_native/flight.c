/*
 * The flight recorder (AUTONVTX_FLIGHT_RANGE): the spiller's periodic write also scans what it
 * wrote for instances of one range, and when an instance lasts more than FACTOR times the
 * median of those before it, the window of the last KEEP instances and the slow one, every
 * thread's events in it, is written as a recording of its own: <record dir>/flight-N/<pid>.anr
 * and flight-N/flight.json (what fired, against what). autonvtx's Python turns each into a trace.
 *
 * Nothing here runs on the program's threads: the recording callbacks are those of any run. The
 * memory is a ring: chunks the spiller has written stay mapped (instead of being freed at once)
 * up to half the budget, the oldest freed first, so the window is read from memory.
 *
 * Nesting stays true in a window: a range is written whole or not at all. One that began before
 * the window (an epoch, the training loop) is left out, and flight.json names it; one that began
 * in it keeps its end, even when that comes after the slow instance ended.
 *
 * Everything here runs under g_lock, on the spiller thread (or at the final write).
 */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

#include <stdarg.h>

int g_flight;
int g_flight_spill = 1;

#define MEDIAN_OF 1000u      /* the median is over the last MEDIAN_OF instances (all, before that many) */
#define MAX_KEEP 1000u
#define MAX_PENDING 16
#define NAME_MAX_BYTES 200u
#define MAX_WATCHED_STARTS 256u
#define MAX_NAMED_ENCLOSING 32u

/* Settings, from the environment autonvtx run sets. */
static char* g_pattern;      /* the range's name, numbers and {placeholders} written "{n}" */
static size_t g_pattern_len;
static char* g_shown_range;  /* as the user gave it */
static double g_factor = 3.0;
static uint32_t g_keep = 10, g_max_files = 20, g_warmup = 5;
static uint64_t g_ring_bytes;
static char g_out_head[4096], g_out_tail[64]; /* the trace name around ".flight-N" */

/* One thread's open ranges as the scanner saw them: pushes (per domain) not popped yet. */
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

typedef struct watched_start {
    uint64_t id, ts;
    thread_buffer* thread;
    char* name;
} watched_start;

/* The instances so far (raw timestamps: TSC ticks or ns). */
static uint64_t g_instances;
static uint64_t g_arrivals[MEDIAN_OF]; /* the measured durations, oldest overwritten */
static uint64_t g_sorted[MEDIAN_OF];   /* the same, sorted */
static uint32_t g_measured, g_arrival_pos;
typedef struct span_ts { uint64_t start, end; } span_ts;
static span_ts g_last[MAX_KEEP + 1];   /* the last KEEP + 1 instances, a ring */
static uint32_t g_last_pos, g_last_len;
static watched_start g_starts[MAX_WATCHED_STARTS];
static uint32_t g_start_count;

typedef struct trigger {
    uint64_t ordinal, start, end, window_start, median, measured;
    uint32_t in_window;     /* instances of the window (KEEP + 1 unless fewer came before) */
    thread_buffer* thread;
    char name[NAME_MAX_BYTES + 1];
} trigger;
static trigger g_pending[MAX_PENDING];
static int g_pending_count;
static uint64_t g_unwritten_triggers; /* past MAX_PENDING in one write, or past --flight-max */
static int g_said_max;

/* Registered strings by id (ids are given in order, from 1) and whether each names the range. */
static string_entry** g_by_id;
static uint8_t* g_id_matches; /* 0 not looked at, 1 yes, 2 no */
static size_t g_by_id_len, g_by_id_cap;

/* ---- settings ---- */

static char* folded_pattern(const char* given, size_t* out_len)
{
    size_t n = strlen(given), i = 0, k = 0;
    char* out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    while (i < n) {
        const char* close = given[i] == '{' ? strchr(given + i + 1, '}') : NULL;
        size_t end = number_end((const unsigned char*)given, n, i);
        if (close && !memchr(given + i + 1, '{', (size_t)(close - given - i - 1))) {
            memcpy(out + k, "{n}", 3); /* a region template's placeholder: any number */
            k += 3;
            i = (size_t)(close - given) + 1;
        } else if (end > i) {
            memcpy(out + k, "{n}", 3);
            k += 3;
            i = end;
        } else {
            out[k++] = given[i++];
        }
    }
    out[k] = '\0';
    *out_len = k;
    return out;
}

static uint32_t env_u32(const char* name, uint32_t fallback, uint32_t most)
{
    const char* v = getenv(name);
    char* end = NULL;
    unsigned long x;
    if (!v || !*v)
        return fallback;
    x = strtoul(v, &end, 10);
    return end != v && x <= most ? (uint32_t)x : fallback;
}

void flight_configure(void)
{
    const char* range = getenv("AUTONVTX_FLIGHT_RANGE");
    const char* factor = getenv("AUTONVTX_FLIGHT_FACTOR");
    const char* head = getenv("AUTONVTX_FLIGHT_HEAD");
    const char* tail = getenv("AUTONVTX_FLIGHT_TAIL");
    g_flight = 0;
    if (!range || !*range || !g_record_dir[0] || g_keep_last)
        return;
    free(g_pattern);
    free(g_shown_range);
    g_pattern = folded_pattern(range, &g_pattern_len);
    g_shown_range = strdup(range);
    if (!g_pattern || !g_shown_range)
        return;
    if (factor && *factor) {
        char* end = NULL;
        double f = strtod(factor, &end);
        if (end != factor && f > 1.0)
            g_factor = f;
    }
    g_keep = env_u32("AUTONVTX_FLIGHT_KEEP", 10, MAX_KEEP);
    g_max_files = env_u32("AUTONVTX_FLIGHT_MAX", 20, 1000000);
    g_warmup = env_u32("AUTONVTX_FLIGHT_WARMUP", 5, 1000000);
    g_ring_bytes = g_limit / 2; /* the other half: what the threads fill between two writes */
    g_flight_spill = env_u32("AUTONVTX_FLIGHT_SPILL", 1, 1) != 0;
    snprintf(g_out_head, sizeof(g_out_head), "%s", head ? head : "trace");
    snprintf(g_out_tail, sizeof(g_out_tail), "%s", tail ? tail : ".json");
    g_flight = 1;
}

/* ---- reading records ---- */

static string_entry* string_by_id(uint32_t id)
{
    while (g_by_id_len < id) {
        string_entry* next = g_by_id_len ? g_by_id[g_by_id_len - 1]->next_in_order : g_strings_first;
        if (!next)
            return NULL;
        if (g_by_id_len == g_by_id_cap) {
            size_t cap = g_by_id_cap ? g_by_id_cap * 2 : 1024;
            string_entry** grown = realloc(g_by_id, cap * sizeof(*grown));
            uint8_t* flags = realloc(g_id_matches, cap);
            if (grown)
                g_by_id = grown;
            if (flags)
                g_id_matches = flags;
            if (!grown || !flags)
                return NULL;
            memset(g_id_matches + g_by_id_cap, 0, cap - g_by_id_cap);
            g_by_id_cap = cap;
        }
        g_by_id[g_by_id_len++] = next;
    }
    return id ? g_by_id[id - 1] : NULL;
}

/* The record's message (registered strings looked up), or 0 when it has none. */
static int record_message(const char* p, const char** text, size_t* len, uint32_t* registered)
{
    anr_record_head h;
    size_t off = sizeof(h);
    memcpy(&h, p, sizeof(h));
    if (h.kind == ANR_K_START || h.kind == ANR_K_END)
        off += 8;
    if (h.payload_type)
        off += 8;
    if (h.flags & ANR_F_COLOR)
        off += 4;
    if (h.flags & ANR_F_CATEGORY)
        off += 4;
    *registered = 0;
    if (h.message_kind == ANR_M_REGISTERED) {
        string_entry* e;
        memcpy(registered, p + off, 4);
        if (!(e = string_by_id(*registered)))
            return 0;
        *text = e->text;
        *len = e->len;
        return 1;
    }
    if (h.message_kind == ANR_M_INLINE) {
        uint32_t n;
        memcpy(&n, p + off, 4);
        *text = p + off + 4;
        *len = n;
        return 1;
    }
    return 0;
}

/* Whether `text`, its numbers written "{n}", is the watched range's name from g_pattern[k] on. */
static int matches_from(const char* text, size_t len, size_t k)
{
    const unsigned char* s = (const unsigned char*)text;
    size_t i = 0;
    while (i < len) {
        size_t end = number_end(s, len, i);
        if (end > i) {
            if (k + 3 > g_pattern_len || memcmp(g_pattern + k, "{n}", 3) != 0)
                return 0;
            k += 3;
            i = end;
        } else {
            if (k >= g_pattern_len || g_pattern[k] != text[i])
                return 0;
            ++k;
            ++i;
        }
    }
    return k == g_pattern_len;
}

/* The name alone, or "domain:name" as the summary shows it (`autonvtx:train.step`). */
static int name_matches(uint32_t domain, const char* text, size_t len)
{
    domain_entry* d;
    if (matches_from(text, len, 0))
        return 1;
    for (d = g_domains; d; d = d->next) {
        if (d->id == domain) {
            size_t n = strlen(d->name);
            return n < g_pattern_len && memcmp(g_pattern, d->name, n) == 0 && g_pattern[n] == ':'
                && matches_from(text, len, n + 1);
        }
    }
    return 0;
}

static int is_watched(const char* p)
{
    const char* text;
    size_t len;
    uint32_t id, domain;
    if (!record_message(p, &text, &len, &id))
        return 0;
    memcpy(&domain, p + 4, 4);
    if (id && id <= g_by_id_len) {
        if (!g_id_matches[id - 1])
            g_id_matches[id - 1] = name_matches(domain, text, len) ? 1 : 2;
        return g_id_matches[id - 1] == 1;
    }
    return name_matches(domain, text, len);
}

static char* record_name(const char* p)
{
    const char* text;
    size_t len;
    uint32_t id;
    char* name;
    if (!record_message(p, &text, &len, &id))
        return strdup("");
    if (len > NAME_MAX_BYTES)
        len = NAME_MAX_BYTES;
    if ((name = malloc(len + 1)) != NULL) {
        memcpy(name, text, len);
        name[len] = '\0';
    }
    return name;
}

static uint64_t record_ts(const char* p)
{
    uint64_t ts;
    memcpy(&ts, p + 8, 8);
    return ts;
}

static uint64_t record_id(const char* p)
{
    uint64_t id;
    memcpy(&id, p + 16, 8);
    return id;
}

/* Calls visit(record, size, arg) for each record from (first, from) up to (last, last_used), or
   until it returns 0. */
typedef int (*record_visitor)(const char* p, size_t size, void* arg);

static void walk(chunk* first, size_t from, chunk* last, size_t last_used, record_visitor visit, void* arg)
{
    chunk* c;
    for (c = first; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        size_t at = c == first ? from : 0;
        size_t end = c == last ? last_used : atomic_load_explicit(&c->used, memory_order_acquire);
        while (at < end) {
            size_t size = anr_record_size(c->data + at, end - at);
            if (!size)
                break;
            if (!visit(c->data + at, size, arg))
                return;
            at += size;
        }
        if (c == last)
            break;
    }
}

/* ---- the instances ---- */

static double ns_per_tick(void)
{
    uint64_t tsc = 0, ns = 0;
    ts_convert conv;
    if (!g_use_tsc)
        return 1.0;
    read_anchor(&tsc, &ns);
    conv = conversion_at(tsc, ns);
    return conv.ns_per_tick > 0 ? conv.ns_per_tick : 1.0;
}

static uint64_t median(void)
{
    if (!g_measured)
        return 0;
    if (g_measured % 2)
        return g_sorted[g_measured / 2];
    return (g_sorted[g_measured / 2 - 1] + g_sorted[g_measured / 2]) / 2;
}

static size_t sorted_position(uint64_t value)
{
    size_t lo = 0, hi = g_measured;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_sorted[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void measure(uint64_t duration)
{
    size_t at;
    if (g_measured == MEDIAN_OF) { /* the oldest leaves the median */
        uint64_t old = g_arrivals[g_arrival_pos];
        at = sorted_position(old);
        memmove(g_sorted + at, g_sorted + at + 1, (g_measured - at - 1) * sizeof(uint64_t));
        g_measured--;
    }
    at = sorted_position(duration);
    memmove(g_sorted + at + 1, g_sorted + at, (g_measured - at) * sizeof(uint64_t));
    g_sorted[at] = duration;
    g_measured++;
    g_arrivals[g_arrival_pos] = duration;
    g_arrival_pos = (g_arrival_pos + 1) % MEDIAN_OF;
}

static void instance(thread_buffer* b, uint64_t start, uint64_t end, const char* name)
{
    uint64_t duration = end > start ? end - start : 0;
    uint64_t ordinal = ++g_instances;
    uint32_t slots = g_keep + 1;
    if (ordinal > g_warmup) {
        /* Compared once the median holds as many instances as the warm-up (at least one). */
        uint64_t m = median();
        uint32_t enough = g_warmup ? g_warmup : 1;
        if (g_measured >= enough && (double)duration > g_factor * (double)m) {
            if (g_pending_count < MAX_PENDING) {
                trigger* t = &g_pending[g_pending_count++];
                uint32_t before = g_last_len < g_keep ? g_last_len : g_keep;
                t->ordinal = ordinal;
                t->start = start;
                t->end = end;
                t->median = m;
                t->measured = g_measured;
                t->thread = b;
                t->in_window = before + 1;
                t->window_start = before ? g_last[(g_last_pos + slots - before) % slots].start : start;
                snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
            } else {
                g_unwritten_triggers++;
            }
        }
        measure(duration);
    }
    g_last[g_last_pos] = (span_ts){ start, end };
    g_last_pos = (g_last_pos + 1) % slots;
    if (g_last_len < slots)
        g_last_len++;
}

/* ---- the scan of what the spiller wrote ---- */

static struct flight_thread* thread_state(thread_buffer* b)
{
    if (!b->flight)
        b->flight = calloc(1, sizeof(struct flight_thread));
    return b->flight;
}

static void scan_push(struct flight_thread* f, uint32_t domain, uint64_t ts, int watched, const char* p)
{
    if (f->len == f->cap) {
        uint32_t cap = f->cap ? f->cap * 2 : 64;
        open_range* grown = realloc(f->stack, cap * sizeof(*grown));
        if (!grown)
            return;
        f->stack = grown;
        f->cap = cap;
    }
    f->stack[f->len++] = (open_range){ domain, (uint32_t)watched, ts, watched ? record_name(p) : NULL, p };
}

typedef struct scan_state {
    thread_buffer* b;
    struct flight_thread* f;
} scan_state;

static int scan_record(const char* p, size_t size, void* arg)
{
    scan_state* s = arg;
    struct flight_thread* f = s->f;
    anr_record_head h;
    uint32_t i;
    (void)size;
    memcpy(&h, p, sizeof(h));
    switch (h.kind) {
    case ANR_K_PUSH:
        scan_push(f, h.domain, h.ts, is_watched(p), p);
        break;
    case ANR_K_POP:
        for (i = f->len; i-- > 0;) { /* pushes and pops pair within a domain */
            if (f->stack[i].domain == h.domain) {
                open_range r = f->stack[i];
                memmove(f->stack + i, f->stack + i + 1, (f->len - i - 1) * sizeof(open_range));
                f->len--;
                if (r.watched)
                    instance(s->b, r.ts, h.ts, r.name);
                free(r.name);
                break;
            }
        }
        break;
    case ANR_K_START:
        if (g_start_count < MAX_WATCHED_STARTS && is_watched(p))
            g_starts[g_start_count++] = (watched_start){ record_id(p), h.ts, s->b, record_name(p) };
        break;
    case ANR_K_END:
        for (i = 0; i < g_start_count; ++i) {
            if (g_starts[i].id == record_id(p)) {
                instance(g_starts[i].thread, g_starts[i].ts, h.ts, g_starts[i].name);
                free(g_starts[i].name);
                g_starts[i] = g_starts[--g_start_count];
                break;
            }
        }
        break;
    default:
        break;
    }
    return 1;
}

void flight_scan(thread_buffer* b, chunk* first, size_t from, chunk* last, size_t last_used)
{
    scan_state s = { b, thread_state(b) };
    if (!s.f || !first)
        return;
    walk(first, from, last, last_used, scan_record, &s);
}

/* ---- writing a window ---- */

typedef struct bytes {
    char* p;
    size_t len, cap;
} bytes;

static void bytes_add(bytes* b, const void* p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char* grown;
        while (cap < b->len + n)
            cap *= 2;
        if (!(grown = realloc(b->p, cap)))
            return;
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* A JSON string (quotes included) of `text`: control characters, quotes and backslashes escaped. */
static void json_string(bytes* out, const char* text)
{
    const unsigned char* s = (const unsigned char*)text;
    bytes_add(out, "\"", 1);
    for (; *s; ++s) {
        char esc[8];
        if (*s == '"' || *s == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*s;
            bytes_add(out, esc, 2);
        } else if (*s < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", *s);
            bytes_add(out, esc, 6);
        } else {
            bytes_add(out, s, 1);
        }
    }
    bytes_add(out, "\"", 1);
}

static void json_printf(bytes* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
static void json_printf(bytes* out, const char* format, ...)
{
    char tmp[512];
    va_list args;
    int n;
    va_start(args, format);
    n = vsnprintf(tmp, sizeof(tmp), format, args);
    va_end(args);
    if (n > 0)
        bytes_add(out, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* The window of one trigger, and what writing it found. */
typedef struct window {
    uint64_t from, to;         /* raw timestamps: the first kept instance's start, the slow one's end */
    ts_convert conv;
    uint64_t* starts;          /* ids of start/end ranges begun in the window (sorted) */
    size_t nstarts, starts_cap;
    bytes info_enclosing;      /* JSON entries of ranges left out for beginning before the window */
    uint64_t enclosing, enclosing_unnamed, still_open;
    /* per thread, while walking it */
    thread_buffer* b;
    bytes records;
    uint64_t events;
    uint64_t walk_from;        /* the first timestamp of the thread's walked chunks */
    uint64_t held;             /* the thread's oldest event in the ring */
    open_range* stack;         /* watched: 1 kept (began in the window), 0 before it, 2 after it */
    const char** pushes;       /* each open range's push record (in the ring, under g_lock) */
    uint32_t len, cap;
    int crossed;
} window;

static int collect_start(const char* p, size_t size, void* arg)
{
    window* w = arg;
    (void)size;
    if (record_ts(p) > w->to)
        return 0;
    if (p[0] == ANR_K_START && record_ts(p) >= w->from && record_ts(p) <= w->to) {
        if (w->nstarts == w->starts_cap) {
            size_t cap = w->starts_cap ? w->starts_cap * 2 : 256;
            uint64_t* grown = realloc(w->starts, cap * sizeof(*grown));
            if (!grown)
                return 1;
            w->starts = grown;
            w->starts_cap = cap;
        }
        w->starts[w->nstarts++] = record_id(p);
    }
    return 1;
}

static int kept_start(const window* w, uint64_t id)
{
    size_t i;
    for (i = 0; i < w->nstarts; ++i)
        if (w->starts[i] == id)
            return 1;
    return 0;
}

static void emit(window* w, const char* p, size_t size)
{
    size_t at = w->records.len;
    uint64_t ts;
    bytes_add(&w->records, p, size);
    if (w->records.len != at + size)
        return;
    ts = w->conv.on ? convert_ts(&w->conv, record_ts(p)) : record_ts(p);
    memcpy(w->records.p + at + 8, &ts, 8);
    w->events++;
}

static void name_enclosing(window* w, uint64_t ts, char* name)
{
    w->enclosing++;
    if (w->enclosing <= MAX_NAMED_ENCLOSING) {
        uint64_t ns = w->conv.on ? convert_ts(&w->conv, ts) : ts;
        if (w->info_enclosing.len)
            bytes_add(&w->info_enclosing, ",", 1);
        json_printf(&w->info_enclosing, "{\"tid\": %u, \"start_ns\": %llu, \"name\": ", w->b->tid,
                    (unsigned long long)ns);
        json_string(&w->info_enclosing, name ? name : "");
        bytes_add(&w->info_enclosing, "}", 1);
    }
    free(name);
}

/* The ranges open when the window begins: left out whole, named in flight.json. Those pushed
   before the walk's first chunk are the scanner's (still open when it last looked). */
static void note_enclosing(window* w)
{
    uint32_t i;
    struct flight_thread* f = w->b->flight;
    w->crossed = 1;
    for (i = 0; f && i < f->len; ++i) {
        open_range* r = &f->stack[i];
        if (r->ts >= w->walk_from)
            break;
        name_enclosing(w, r->ts, r->name ? strdup(r->name) : r->ts >= w->held ? record_name(r->record) : NULL);
    }
    for (i = 0; i < w->len; ++i) {
        open_range* r = &w->stack[i];
        if (r->watched) /* began in the window (or after): not open at its start */
            continue;
        name_enclosing(w, r->ts, record_name(w->pushes[i]));
    }
}

static int window_record(const char* p, size_t size, void* arg)
{
    window* w = arg;
    anr_record_head h;
    uint32_t i;
    memcpy(&h, p, sizeof(h));
    if (!w->crossed && h.ts >= w->from)
        note_enclosing(w);
    if (h.ts > w->to && !w->nstarts) { /* past the window: only the ends of ranges kept matter */
        for (i = 0; i < w->len && w->stack[i].watched != 1; ++i)
            ;
        if (i == w->len)
            return 0;
    }
    switch (h.kind) {
    case ANR_K_PUSH:
        if (w->len == w->cap) {
            uint32_t cap = w->cap ? w->cap * 2 : 64;
            open_range* grown = realloc(w->stack, cap * sizeof(*grown));
            const char** records = grown ? realloc(w->pushes, cap * sizeof(*records)) : NULL;
            if (grown)
                w->stack = grown;
            if (!records)
                return 1;
            w->pushes = records;
            w->cap = cap;
        }
        {
            int inside = h.ts >= w->from && h.ts <= w->to;
            /* A push after the window is neither kept nor an enclosing range: watched = 2. */
            uint32_t state = inside ? 1u : h.ts > w->to ? 2u : 0u;
            w->stack[w->len] = (open_range){ h.domain, state, h.ts, NULL, p };
            w->pushes[w->len++] = p; /* named only if it turns out to enclose the window */
            if (inside)
                emit(w, p, size);
        }
        break;
    case ANR_K_POP:
        for (i = w->len; i-- > 0;) {
            if (w->stack[i].domain == h.domain) {
                open_range r = w->stack[i];
                memmove(w->stack + i, w->stack + i + 1, (w->len - i - 1) * sizeof(open_range));
                memmove(w->pushes + i, w->pushes + i + 1, (w->len - i - 1) * sizeof(const char*));
                w->len--;
                if (r.watched == 1)
                    emit(w, p, size);
                return 1;
            }
        }
        if (h.ts >= w->from && h.ts <= w->to) /* its push is older than the ring */
            w->enclosing_unnamed++;
        break;
    case ANR_K_MARK:
        if (h.ts >= w->from && h.ts <= w->to)
            emit(w, p, size);
        break;
    case ANR_K_START:
        if (h.ts >= w->from && h.ts <= w->to)
            emit(w, p, size);
        break;
    case ANR_K_END:
        if (kept_start(w, record_id(p)))
            emit(w, p, size);
        else if (h.ts >= w->from && h.ts <= w->to)
            w->enclosing_unnamed++;
        break;
    default:
        break;
    }
    return 1;
}

static void window_thread(writer* out, window* w, thread_buffer* b)
{
    chunk* head = atomic_load_explicit(&b->head, memory_order_acquire);
    chunk* c = head;
    chunk* last = NULL;
    size_t last_used = 0, name_len = strnlen(b->name, sizeof(b->name));
    uint32_t i;
    for (; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        last = c;
        last_used = atomic_load_explicit(&c->used, memory_order_acquire);
    }
    w->b = b;
    w->records.len = 0;
    w->events = 0;
    w->len = 0;
    w->crossed = 0;
    w->held = w->walk_from = UINT64_MAX;
    if (head) {
        /* From the last chunk that begins before the window: what is older only matters for the
           ranges open when the window begins, which the scanner's stack holds. */
        chunk* from = head;
        chunk* next;
        w->held = w->walk_from = record_ts(head->data);
        while ((next = atomic_load_explicit(&from->next, memory_order_acquire)) != NULL
               && atomic_load_explicit(&next->used, memory_order_acquire) >= sizeof(anr_record_head)
               && record_ts(next->data) <= w->from) {
            from = next;
            w->walk_from = record_ts(next->data);
        }
        walk(from, 0, last, last_used, window_record, w);
    }
    if (!w->crossed)
        note_enclosing(w);
    for (i = 0; i < w->len; ++i)
        if (w->stack[i].watched == 1)
            w->still_open++;
    if (!w->records.len)
        return;
    section(out, ANR_T_THREAD, ANR_THREAD_HEAD_BYTES + ANR_ALIGN8(name_len) + w->records.len);
    put_u32(out, b->tid);
    put_u32(out, b->index);
    put_u64(out, 0);
    put_u64(out, w->events);
    put_u32(out, (uint32_t)name_len);
    put_u32(out, 0);
    put(out, b->name, name_len);
    pad(out, name_len);
    put(out, w->records.p, w->records.len);
}

/* The oldest event a thread still holds in memory (raw), or UINT64_MAX. */
static uint64_t oldest_held(thread_buffer* b)
{
    chunk* c = atomic_load_explicit(&b->head, memory_order_acquire);
    for (; c; c = atomic_load_explicit(&c->next, memory_order_acquire))
        if (atomic_load_explicit(&c->used, memory_order_acquire) >= sizeof(anr_record_head))
            return record_ts(c->data);
    return UINT64_MAX;
}

static int write_file(const char* path, const void* data, size_t n)
{
    char tmp[4300];
    int fd, ok;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
        return 0;
    ok = write(fd, data, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok;
}

static void say_duration(char* out, size_t cap, double ns)
{
    if (ns < 1e3)
        snprintf(out, cap, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(out, cap, "%.1f us", ns / 1e3);
    else if (ns < 1e9)
        snprintf(out, cap, "%.2f ms", ns / 1e6);
    else
        snprintf(out, cap, "%.2f s", ns / 1e9);
}

/* flight-N in the record directory, made by this process (mkdir: one process gets each N). */
static uint32_t claim_number(char* dir, size_t cap)
{
    uint32_t n;
    for (n = 1; n <= g_max_files; ++n) {
        snprintf(dir, cap, "%s/flight-%u", g_record_dir, n);
        if (mkdir(dir, 0777) == 0)
            return n;
        if (errno != EEXIST)
            return 0;
    }
    return 0;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_window(const trigger* t)
{
    char dir[4200], path[4300], line[1024], took[32], med[32];
    uint64_t tsc = 0, now = 0, held, began = now_ns(), began_cpu = thread_cpu_ns();
    double per_tick = ns_per_tick();
    uint32_t number, in_window = t->in_window;
    window w;
    writer out;
    bytes info = { NULL, 0, 0 };
    thread_buffer* b;
    int fd, n;

    if (!(number = claim_number(dir, sizeof(dir)))) {
        if (!g_said_max) {
            g_said_max = 1;
            n = snprintf(line, sizeof(line),
                         "autonvtx: flight: %u files written (--flight-max): later slow instances of '%s' are not written\n",
                         g_max_files, g_shown_range);
            if (n > 0 && write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
                g_said_max = 1;
        }
        g_unwritten_triggers++;
        return;
    }
    memset(&w, 0, sizeof(w));
    w.from = t->window_start;
    w.to = t->end;
    held = oldest_held(t->thread);
    if (held > w.from) { /* the ring lost the oldest instances: the window starts with those held */
        uint32_t slots = g_keep + 1, i;
        in_window = 0;
        for (i = 0; i < g_last_len; ++i) {
            const span_ts* s = &g_last[(g_last_pos + slots - 1 - i) % slots];
            if (s->start < held || s->start < t->window_start)
                break;
            in_window++;
        }
        w.from = held;
    }
    if (g_use_tsc)
        read_anchor(&tsc, &now);
    else
        now = now_ns();
    w.conv = conversion_at(tsc, now);

    snprintf(path, sizeof(path), "%s/%d.anr.tmp", dir, (int)g_pid);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
        return;
    out = (writer){ fd, g_write_buffer, 0, 0, 0 };
    {
        file_cursor everything;
        memset(&everything, 0, sizeof(everything));
        write_header(&out);
        write_registries(&out, &everything);
    }
    for (b = g_threads; b; b = b->next) {
        chunk* c = atomic_load_explicit(&b->head, memory_order_acquire);
        chunk* next;
        /* Starts before the window are not wanted: chunks that end before it are skipped. */
        while (c && (next = atomic_load_explicit(&c->next, memory_order_acquire)) != NULL
               && atomic_load_explicit(&next->used, memory_order_acquire) >= sizeof(anr_record_head)
               && record_ts(next->data) < w.from)
            c = next;
        if (c)
            walk(c, 0, NULL, 0, collect_start, &w);
    }
    for (b = g_threads; b; b = b->next)
        window_thread(&out, &w, b);
    section(&out, ANR_T_SPILL, ANR_SPILL_BYTES);
    put_u64(&out, now);
    put_u64(&out, (uint64_t)realtime_offset());
    put_u64(&out, 0);
    put_u64(&out, 0);
    put_u64(&out, 0);
    put_u32(&out, 1);
    put_u32(&out, 0);
    drain(&out);
    close(fd);
    if (!out.failed) {
        char final[4300];
        snprintf(final, sizeof(final), "%s/%d.anr", dir, (int)g_pid);
        if (rename(path, final) != 0)
            out.failed = errno;
    }
    if (out.failed)
        unlink(path);

    say_duration(took, sizeof(took), (double)(t->end - t->start) * per_tick);
    say_duration(med, sizeof(med), (double)t->median * per_tick);
    json_printf(&info, "{\"schema\": \"autonvtx-flight/1\", \"number\": %u, \"pid\": %d, \"tid\": %u, \"range\": ",
                number, (int)g_pid, t->thread->tid);
    json_string(&info, g_shown_range);
    bytes_add(&info, ", \"name\": ", 10);
    json_string(&info, t->name);
    json_printf(&info,
                ", \"instance\": %llu, \"duration_ns\": %.0f, \"median_ns\": %.0f, \"median_of\": %llu, "
                "\"factor\": %g, \"keep\": %u, \"instances_in_window\": %u, \"window_start_ns\": %llu, "
                "\"window_end_ns\": %llu, \"slow_start_ns\": %llu, \"ring_cut\": %s, \"still_open\": %llu, "
                "\"enclosing_left_out\": %llu, \"enclosing_unnamed\": %llu, \"written\": %s, \"error\": %d, "
                "\"write_ns\": %llu, \"write_cpu_ns\": %llu, \"enclosing\": [",
                (unsigned long long)t->ordinal, (double)(t->end - t->start) * per_tick,
                (double)t->median * per_tick, (unsigned long long)t->measured, g_factor, g_keep, in_window,
                (unsigned long long)(w.conv.on ? convert_ts(&w.conv, w.from) : w.from),
                (unsigned long long)(w.conv.on ? convert_ts(&w.conv, w.to) : w.to),
                (unsigned long long)(w.conv.on ? convert_ts(&w.conv, t->start) : t->start),
                held > t->window_start ? "true" : "false", (unsigned long long)w.still_open,
                (unsigned long long)w.enclosing, (unsigned long long)w.enclosing_unnamed,
                out.failed ? "false" : "true", out.failed, (unsigned long long)(now_ns() - began),
                (unsigned long long)(thread_cpu_ns() - began_cpu));
    if (w.info_enclosing.len)
        bytes_add(&info, w.info_enclosing.p, w.info_enclosing.len);
    bytes_add(&info, "]}\n", 3);
    snprintf(path, sizeof(path), "%s/flight.json", dir);
    if (info.p)
        write_file(path, info.p, info.len);

    if (out.failed)
        n = snprintf(line, sizeof(line), "autonvtx: flight: '%s' took %s, %.1fx the median %s; could not write its window: %s\n",
                     t->name, took, t->median ? (double)(t->end - t->start) / (double)t->median : 0.0, med,
                     strerror(out.failed));
    else
        n = snprintf(line, sizeof(line),
                     "autonvtx: flight: '%s' (instance %llu of '%s') took %s, %.1fx the median %s of the %llu before it;"
                     " it and the %u before it go to %s.flight-%u%s\n",
                     t->name, (unsigned long long)t->ordinal, g_shown_range, took,
                     t->median ? (double)(t->end - t->start) / (double)t->median : 0.0, med,
                     (unsigned long long)t->measured, in_window - 1, g_out_head, number, g_out_tail);
    if (n > 0 && write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
        n = 0;
    free(info.p);
    free(w.info_enclosing.p);
    free(w.records.p);
    free(w.stack);
    free(w.pushes);
    free(w.starts);
}

/* Frees the oldest written chunks (of any thread) while the ring holds more than its bytes. */
static void trim(void)
{
    for (;;) {
        thread_buffer *b, *oldest = NULL;
        uint64_t held = 0, oldest_ts = UINT64_MAX;
        chunk* c;
        for (b = g_threads; b; b = b->next) {
            chunk* head = atomic_load_explicit(&b->head, memory_order_acquire);
            if (!b->spill_chunk)
                continue;
            for (c = head; c && c != b->spill_chunk; c = atomic_load_explicit(&c->next, memory_order_acquire))
                held += sizeof(chunk) + c->cap;
            if (head && head != b->spill_chunk && record_ts(head->data) < oldest_ts) {
                oldest_ts = record_ts(head->data);
                oldest = b;
            }
        }
        if (held <= g_ring_bytes || !oldest)
            return;
        c = atomic_load_explicit(&oldest->head, memory_order_acquire);
        atomic_store_explicit(&oldest->head, atomic_load_explicit(&c->next, memory_order_acquire),
                              memory_order_release);
        spare_give(c);
    }
}

void flight_after_spill(void)
{
    int i;
    for (i = 0; i < g_pending_count; ++i)
        write_window(&g_pending[i]);
    g_pending_count = 0;
    trim();
}

void flight_forget_thread(thread_buffer* b)
{
    uint32_t i;
    if (!b->flight)
        return;
    for (i = 0; i < b->flight->len; ++i)
        free(b->flight->stack[i].name);
    free(b->flight->stack);
    free(b->flight);
    b->flight = NULL;
}

/* A fork child watches its own instances, from none. */
void flight_reset_in_child(void)
{
    uint32_t i;
    for (i = 0; i < g_start_count; ++i)
        free(g_starts[i].name);
    g_start_count = 0;
    g_instances = 0;
    g_measured = g_arrival_pos = 0;
    g_last_pos = g_last_len = 0;
    g_pending_count = 0;
    g_said_max = 0;
}
