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
#include "flight.h"

int g_flight;
int g_flight_spill = 1;

#define MEDIAN_OF 1000u      /* the median is over the last MEDIAN_OF instances (all, before that many) */
#define MAX_PENDING 16
#define MAX_WATCHED_STARTS 256u

/* Settings, from the environment autonvtx run sets. */
static char* g_pattern;      /* the range's name, numbers and {placeholders} written "{n}" */
static size_t g_pattern_len;
char* g_shown_range;  /* as the user gave it */
double g_factor = 3.0;
uint32_t g_keep = 10, g_max_files = 20, g_warmup = 5;
uint64_t g_ring_bytes;
char g_out_head[4096], g_out_tail[64]; /* the trace name around ".flight-N" */

/* One thread's open ranges as the scanner saw them: pushes (per domain) not popped yet. */


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
span_ts g_last[MAX_KEEP + 1];   /* the last KEEP + 1 instances, a ring */
uint32_t g_last_pos, g_last_len;
static watched_start g_starts[MAX_WATCHED_STARTS];
static uint32_t g_start_count;

static trigger g_pending[MAX_PENDING];
static int g_pending_count;
uint64_t g_unwritten_triggers; /* past MAX_PENDING in one write, or past --flight-max */
int g_said_max;

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
    /* 3/8 of the bound: the rest is what the threads fill between two writes, and the spare
       chunks (buffers.c) */
    g_ring_bytes = g_limit / 8 * 3;
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

char* record_name(const char* p)
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

uint64_t record_ts(const char* p)
{
    uint64_t ts;
    memcpy(&ts, p + 8, 8);
    return ts;
}

uint64_t record_id(const char* p)
{
    uint64_t id;
    memcpy(&id, p + 16, 8);
    return id;
}


void walk(chunk* first, size_t from, chunk* last, size_t last_used, record_visitor visit, void* arg)
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

double ns_per_tick(void)
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

void flight_after_spill(void)
{
    int i;
    for (i = 0; i < g_pending_count; ++i)
        write_window(&g_pending[i]);
    g_pending_count = 0;
    trim_ring();
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
