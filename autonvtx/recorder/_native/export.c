/*
 * autonvtx exporter: reads the recorder's per-process files (format 2, see recorder.c) and streams
 * them into Chrome trace-event JSON, Perfetto TracePackets and range statistics, in one pass per
 * file. Memory grows with nesting depth, open start/end ranges, distinct names and (for the
 * statistics' exact medians) 8 bytes per range, never with the trace written. Called through
 * ctypes by autonvtx/recorder/export.py, which writes the small parts (heads, descriptors).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)
#define NONE32 0xFFFFFFFFu

enum { K_PUSH = 1, K_POP = 2, K_START = 3, K_END = 4, K_MARK = 5 };
enum { T_END = 0, T_CMDLINE = 1, T_DOMAINS = 2, T_STRINGS = 3, T_CATEGORIES = 4, T_THREAD = 5,
       T_THREAD_NAMES = 6, T_SPILL = 7 };
enum { STATS_FLAT = 1, STATS_TREE = 2, STATS_BY_THREAD = 4, STATS_CLASS = 8 };

/* ---- growable bytes ---- */

typedef struct buf {
    char* p;
    size_t len, cap;
    int failed;
} buf;

static __attribute__((noinline)) int buf_grow(buf* b, size_t n)
{
    size_t cap = b->cap ? b->cap : 4096;
    char* q;
    while (cap < b->len + n)
        cap *= 2;
    if (!(q = realloc(b->p, cap))) {
        b->failed = 1;
        return 0;
    }
    b->p = q;
    b->cap = cap;
    return 1;
}

/* Inlined: most callers pass a constant length, which the compiler turns into plain stores. */
static inline __attribute__((always_inline)) void buf_add(buf* b, const void* p, size_t n)
{
    if (__builtin_expect(b->len + n > b->cap, 0) && !buf_grow(b, n))
        return;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_str(buf* b, const char* s) { buf_add(b, s, strlen(s)); }

static void buf_u64(buf* b, uint64_t v)
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
static void buf_us(buf* b, uint64_t ns)
{
    char frac[4] = { (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10), (char)('0' + ns % 10), 0 };
    buf_u64(b, ns / 1000);
    buf_add(b, ".", 1);
    buf_add(b, frac, 3);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if the bytes there are not one. */
static size_t utf8_length(const unsigned char* s, size_t n)
{
    size_t len, i;
    uint32_t c;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, c = s[0] & 0x1F;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, c = s[0] & 0x0F;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, c = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; ++i) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    return len;
}

/* A JSON string literal; control characters escaped, bytes that are not UTF-8 become U+FFFD
   (as Python's "replace" decoding reads them), so the file is always valid JSON. */
static void buf_json_string(buf* b, const char* s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, run = 0;
    buf_add(b, "\"", 1);
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : utf8_length((const unsigned char*)s + i, n - i);
        if (len > 0 && c >= 0x20 && c != '"' && c != '\\') {
            i += len;
            continue;
        }
        buf_add(b, s + run, i - run);
        if (len == 0) {
            buf_add(b, "\\ufffd", 6);
        } else if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            buf_add(b, e, 2);
        } else {
            char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            buf_add(b, e, 6);
        }
        i += len ? len : 1;
        run = i;
    }
    buf_add(b, s + run, n - run);
    buf_add(b, "\"", 1);
}

/* Protobuf: varints and tags. */
static void pb_varint(buf* b, uint64_t v)
{
    char tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (char)v;
    buf_add(b, tmp, (size_t)n);
}

static void pb_uint(buf* b, uint32_t field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

static void pb_bytes(buf* b, uint32_t field, const void* p, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    buf_add(b, p, n);
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

static uint32_t intern(interner* t, uint32_t domain, const char* s, size_t n)
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

static const char* name_json(interner* t, uint32_t id, size_t* len)
{
    name* e = &t->items[id];
    if (!e->json) {
        buf b = { NULL, 0, 0, 0 };
        buf_json_string(&b, e->text ? e->text : "", e->text ? e->len : 0);
        e->json = b.p;
        e->json_len = b.len;
    }
    *len = e->json_len;
    return e->json;
}

static void interner_free(interner* t)
{
    size_t i;
    for (i = 0; i < t->count; ++i) {
        free(t->items[i].text);
        free(t->items[i].json);
    }
    free(t->items);
    free(t->slots);
}

/* ---- statistics rows: (group, parent row, name) -> durations ---- */

typedef struct row {
    uint64_t group;
    int64_t parent; /* tree mode: the enclosing range's row, else -1 */
    uint32_t name;  /* id in the names interner (its domain is the global domain id) */
    uint32_t depth;
    uint64_t count, total, self, min, max, open, seen;
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
} stats;

static uint64_t row_hash(uint64_t group, int64_t parent, uint32_t name)
{
    uint64_t h = group * 0x9E3779B97F4A7C15ull ^ (uint64_t)parent * 0xC2B2AE3D27D4EB4Full ^ name;
    return h ^ (h >> 29);
}

static int stats_grow(stats* s)
{
    size_t n = s->nslots ? s->nslots * 2 : 1024, i;
    uint32_t* slots = calloc(n, sizeof(*slots));
    if (!slots)
        return 0;
    for (i = 0; i < s->count; ++i) {
        size_t j = row_hash(s->rows[i].group, s->rows[i].parent, s->rows[i].name) & (n - 1);
        while (slots[j])
            j = (j + 1) & (n - 1);
        slots[j] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = n;
    return 1;
}

static int64_t stats_row(stats* s, uint64_t group, int64_t parent, uint32_t name, uint32_t depth)
{
    size_t j;
    row* r;
    if ((s->count + 1) * 2 > s->nslots && !stats_grow(s))
        return -1;
    for (j = row_hash(group, parent, name) & (s->nslots - 1); s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
        r = &s->rows[s->slots[j] - 1];
        if (r->group == group && r->parent == parent && r->name == name)
            return s->slots[j] - 1;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        row* rows = realloc(s->rows, cap * sizeof(*rows));
        if (!rows)
            return -1;
        s->rows = rows;
        s->cap = cap;
    }
    r = &s->rows[s->count];
    memset(r, 0, sizeof(*r));
    r->group = group;
    r->parent = parent;
    r->name = name;
    r->depth = depth;
    r->min = UINT64_MAX;
    s->slots[j] = (uint32_t)s->count + 1;
    return (int64_t)s->count++;
}

static void stats_add(row* r, uint64_t duration, uint64_t self, int is_open)
{
    r->seen++;
    if (r->count == r->dcap) {
        size_t cap = r->dcap ? r->dcap * 2 : 16;
        uint64_t* d = realloc(r->durations, cap * sizeof(*d));
        if (!d)
            return;
        r->durations = d;
        r->dcap = cap;
    }
    r->durations[r->count++] = duration;
    r->total += duration;
    r->self += self;
    r->open += is_open != 0;
    r->sumsq += (long double)duration * (long double)duration;
    if (duration < r->min)
        r->min = duration;
    if (duration > r->max)
        r->max = duration;
}

static void stats_span(stats* s, uint64_t group, uint64_t first, uint64_t last)
{
    size_t i;
    for (i = 0; i < s->ngroups; ++i) {
        if (s->groups[i].group == group) {
            if (first < s->groups[i].first)
                s->groups[i].first = first;
            if (last > s->groups[i].last)
                s->groups[i].last = last;
            return;
        }
    }
    {
        group_span* g = realloc(s->groups, (s->ngroups + 1) * sizeof(*g));
        if (!g)
            return;
        s->groups = g;
        g[s->ngroups++] = (group_span){ group, first, last };
    }
}

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
} opened;

typedef struct thread_state {
    uint32_t index, tid, seq;
    opened* stack;
    size_t depth, cap;
    uint64_t first, last;
    uint8_t* seen_names;   /* Perfetto: interned on this thread's sequence */
    size_t seen_names_cap;
    uint8_t* seen_cats;
    size_t seen_cats_cap;
    uint32_t* row_seen;    /* --skip-first: instances of each row met on this thread */
    size_t row_seen_cap;
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
    struct { uint32_t domain, number, id; }* cats; /* the file's named categories, oldest first */
    size_t ncats;
    started* starts[START_BUCKETS];
    uint64_t info[8];
    /* Capture windows (regions' `capture`, the start/end ranges capture@autonvtx) of the file
       being read: only events that begin inside one are exported. */
    uint64_t (*windows)[2];
    size_t nwindows, windows_cap;
    uint64_t outside; /* events of the file left out */
} exporter;

enum { I_RANGES, I_MARKS, I_OPEN, I_UNMATCHED, I_FIRST, I_LAST, I_FLUSH, I_ENDED };

static void flush_out(exporter* x, int force)
{
    if (x->out.len && (force || x->out.len >= (1u << 20))) {
        FILE* f = x->json ? x->json : x->pftrace;
        if (f && fwrite(x->out.p, 1, x->out.len, f) != x->out.len)
            x->out.failed = 1;
        x->out.len = 0;
    }
}

static uint32_t global_domain(exporter* x, uint32_t id)
{
    return id < x->domain_map_cap && x->domain_map[id] != NONE32 ? x->domain_map[id] : 0;
}

static int grow_map(uint32_t** map, size_t* cap, size_t need)
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

/* ---- Chrome JSON ---- */

static void json_payload(buf* b, uint8_t type, uint64_t raw)
{
    char tmp[40];
    double v;
    if (type == 1) {
        buf_u64(b, raw);
        return;
    }
    if (type == 2 || type == 5) {
        int64_t i = type == 2 ? (int64_t)raw : (int64_t)(int32_t)(uint32_t)raw;
        if (i < 0)
            buf_add(b, "-", 1);
        buf_u64(b, i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i);
        return;
    }
    if (type == 4) {
        buf_u64(b, (uint32_t)raw);
        return;
    }
    if (type == 3) {
        memcpy(&v, &raw, 8);
    } else {
        float f;
        uint32_t low = (uint32_t)raw;
        memcpy(&f, &low, 4);
        v = f;
    }
    if (__builtin_isnan(v) || __builtin_isinf(v)) {
        buf_str(b, __builtin_isnan(v) ? "\"nan\"" : v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    {
        int p;
        for (p = 15; p <= 17; ++p) { /* the shortest text that reads back exactly, as Python's repr */
            snprintf(tmp, sizeof(tmp), "%.*g", p, v);
            if (strtod(tmp, NULL) == v)
                break;
        }
        if (!strpbrk(tmp, ".eni"))
            strcat(tmp, ".0");
        buf_str(b, tmp);
    }
}

static void color_text(char out[8], uint32_t color)
{
    /* NVTX colors are ARGB, but clients commonly leave alpha 0 (nvtx's Python package does):
       every tool shows them opaque, so the alpha is left out (#rrggbb). */
    static const char hex[] = "0123456789abcdef";
    int i;
    out[0] = '#';
    for (i = 0; i < 6; ++i)
        out[1 + i] = hex[(color >> (20 - 4 * i)) & 15];
    out[7] = '\0';
}

static void json_args(exporter* x, const opened* o, uint32_t gdomain, int is_open)
{
    buf* b = &x->out;
    size_t n;
    const char* s = name_json(&x->domains, gdomain, &n);
    buf_add(b, "{\"domain\":", 10);
    buf_add(b, s, n);
    if (o->category != NONE32) {
        buf_add(b, ",\"category\":", 12);
        s = name_json(&x->categories, o->category, &n);
        buf_add(b, s, n);
    }
    if (o->has_color) {
        char c[8];
        color_text(c, o->color);
        buf_add(b, ",\"color\":\"", 10);
        buf_add(b, c, 7);
        buf_add(b, "\"", 1);
    }
    if (o->payload_type) {
        buf_add(b, ",\"payload\":", 11);
        json_payload(b, o->payload_type, o->payload);
    }
    if (is_open)
        buf_add(b, ",\"open\":true", 12);
    buf_add(b, "}", 1);
}

static void json_common(exporter* x, const char* phase, uint32_t tid, uint32_t name, uint32_t gdomain)
{
    buf* b = &x->out;
    size_t n;
    const char* s;
    buf_add(b, ",\n{\"ph\":\"", 9);
    buf_str(b, phase);
    buf_add(b, "\",\"pid\":", 8);
    buf_u64(b, x->pid);
    buf_add(b, ",\"tid\":", 7);
    buf_u64(b, tid);
    buf_add(b, ",\"name\":", 8);
    s = name_json(&x->names, name, &n);
    buf_add(b, s, n);
    buf_add(b, ",\"cat\":", 7);
    if (x->domains.items[gdomain].len == 0) {
        buf_add(b, "\"(default)\"", 11);
    } else {
        s = name_json(&x->domains, gdomain, &n);
        buf_add(b, s, n);
    }
}

static void json_range(exporter* x, uint32_t tid, const opened* o, uint64_t end, int is_open)
{
    uint32_t gdomain = global_domain(x, o->domain);
    json_common(x, "X", tid, o->name, gdomain);
    buf_add(&x->out, ",\"ts\":", 6);
    buf_us(&x->out, o->start);
    buf_add(&x->out, ",\"dur\":", 7);
    buf_us(&x->out, end - o->start);
    buf_add(&x->out, ",\"args\":", 8);
    json_args(x, o, gdomain, is_open);
    buf_add(&x->out, "}", 1);
    flush_out(x, 0);
}

static void json_mark(exporter* x, uint32_t tid, const opened* o)
{
    uint32_t gdomain = global_domain(x, o->domain);
    json_common(x, "i", tid, o->name, gdomain);
    buf_add(&x->out, ",\"s\":\"t\",\"ts\":", 14);
    buf_us(&x->out, o->start);
    buf_add(&x->out, ",\"args\":", 8);
    json_args(x, o, gdomain, 0);
    buf_add(&x->out, "}", 1);
    flush_out(x, 0);
}

/* A start/end range: a "b" and an "e" event with the same id. */
static void json_async(exporter* x, uint32_t tid, uint32_t end_tid, const opened* o, uint64_t end, int is_open)
{
    uint32_t gdomain = global_domain(x, o->domain);
    char id[24];
    x->async_id++;
    snprintf(id, sizeof(id), "\"0x%llx\"", (unsigned long long)x->async_id);
    json_common(x, "b", tid, o->name, gdomain);
    buf_add(&x->out, ",\"id\":", 6);
    buf_str(&x->out, id);
    buf_add(&x->out, ",\"ts\":", 6);
    buf_us(&x->out, o->start);
    buf_add(&x->out, ",\"args\":", 8);
    json_args(x, o, gdomain, is_open);
    buf_add(&x->out, "}", 1);
    json_common(x, "e", end_tid, o->name, gdomain);
    buf_add(&x->out, ",\"id\":", 6);
    buf_str(&x->out, id);
    buf_add(&x->out, ",\"ts\":", 6);
    buf_us(&x->out, end);
    buf_add(&x->out, "}", 1);
    flush_out(x, 0);
}

/* ---- Perfetto TracePackets (hand-encoded; field numbers from perfetto's trace proto) ---- */

enum {
    P_TIMESTAMP = 8, P_SEQ = 10, P_TRACK_EVENT = 11, P_INTERNED = 12, P_FLAGS = 13,
    P_DEFAULTS = 59, P_DESCRIPTOR = 60, D_TIMESTAMP_CLOCK = 58, D_TRACK_EVENT = 11,
    E_TYPE = 9, E_TRACK = 11, E_NAME_IID = 10, E_CATEGORY_IIDS = 3, E_ANNOTATIONS = 4,
    A_NAME = 10, A_BOOL = 2, A_UINT = 3, A_INT = 4, A_DOUBLE = 5, A_STRING = 6,
    I_CATEGORIES = 1, I_NAMES = 2, TD_UUID = 1, TD_NAME = 2, TD_PARENT = 5,
    CLOCK_MONOTONIC_ID = 3, SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2,
    SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3
};

static uint64_t thread_uuid(uint32_t pid, uint32_t tid) { return (uint64_t)pid << 32 | tid; }

static void pf_emit_packet(exporter* x)
{
    pb_bytes(&x->out, 1, x->packet.p, x->packet.len); /* Trace.packet */
    x->packet.len = 0;
    flush_out(x, 0);
}

static int mark_seen(uint8_t** seen, size_t* cap, uint32_t id)
{
    if (id >= *cap) {
        size_t n = *cap ? *cap : 64;
        uint8_t* p;
        while (n <= id)
            n *= 2;
        if (!(p = realloc(*seen, n)))
            return 1;
        memset(p + *cap, 0, n - *cap);
        *seen = p;
        *cap = n;
    }
    if ((*seen)[id])
        return 1;
    (*seen)[id] = 1;
    return 0;
}

/* A thread's sequence starts with its defaults: CLOCK_MONOTONIC times on the thread's track. */
static void pf_sequence(exporter* x, thread_state* t)
{
    buf* d = &x->scratch;
    if (t->seq)
        return;
    t->seq = ++x->next_seq;
    d->len = 0;
    pb_uint(d, D_TIMESTAMP_CLOCK, CLOCK_MONOTONIC_ID);
    pb_varint(d, (uint64_t)D_TRACK_EVENT << 3 | 2);
    {
        uint64_t uuid = thread_uuid(x->pid, t->tid);
        buf inner = { NULL, 0, 0, 0 };
        pb_uint(&inner, E_TRACK, uuid);
        pb_varint(d, inner.len);
        buf_add(d, inner.p, inner.len);
        free(inner.p);
    }
    pb_uint(&x->packet, P_SEQ, t->seq);
    pb_uint(&x->packet, P_FLAGS, SEQ_CLEARED);
    pb_bytes(&x->packet, P_DEFAULTS, d->p, d->len);
    pf_emit_packet(x);
}

/* Interned data for the names this event needs that its sequence has not seen, into `d`. */
static void pf_intern(exporter* x, thread_state* t, uint32_t nid, uint32_t gdomain, buf* d)
{
    buf* e = &x->scratch;
    if (!mark_seen(&t->seen_cats, &t->seen_cats_cap, gdomain)) {
        const name* n = &x->domains.items[gdomain];
        e->len = 0;
        pb_uint(e, 1, (uint64_t)gdomain + 1);
        if (n->len)
            pb_bytes(e, 2, n->text, n->len);
        else
            pb_bytes(e, 2, "(default)", 9);
        pb_bytes(d, I_CATEGORIES, e->p, e->len);
    }
    if (!mark_seen(&t->seen_names, &t->seen_names_cap, nid)) {
        const struct name* n = &x->names.items[nid];
        e->len = 0;
        pb_uint(e, 1, (uint64_t)nid + 1);
        pb_bytes(e, 2, n->text ? n->text : "", n->text ? n->len : 0);
        pb_bytes(d, I_NAMES, e->p, e->len);
    }
}

static void pf_annotation_text(buf* ev, const char* key, const char* text, size_t n)
{
    buf a = { NULL, 0, 0, 0 };
    pb_bytes(&a, A_NAME, key, strlen(key));
    pb_bytes(&a, A_STRING, text, n);
    pb_bytes(ev, E_ANNOTATIONS, a.p, a.len);
    free(a.p);
}

static void pf_annotations(exporter* x, buf* ev, const opened* o)
{
    if (o->category != NONE32) {
        const name* c = &x->categories.items[o->category];
        pf_annotation_text(ev, "category", c->text ? c->text : "", c->len);
    }
    if (o->has_color) {
        char c[8];
        color_text(c, o->color);
        pf_annotation_text(ev, "color", c, 7);
    }
    if (o->payload_type) {
        buf a = { NULL, 0, 0, 0 };
        pb_bytes(&a, A_NAME, "payload", 7);
        if (o->payload_type == 1 || o->payload_type == 4) {
            pb_uint(&a, A_UINT, o->payload_type == 1 ? o->payload : (uint32_t)o->payload);
        } else if (o->payload_type == 2 || o->payload_type == 5) {
            int64_t i = o->payload_type == 2 ? (int64_t)o->payload : (int64_t)(int32_t)(uint32_t)o->payload;
            pb_uint(&a, A_INT, (uint64_t)i);
        } else {
            double v;
            if (o->payload_type == 3) {
                memcpy(&v, &o->payload, 8);
            } else {
                float f;
                uint32_t low = (uint32_t)o->payload;
                memcpy(&f, &low, 4);
                v = f;
            }
            pb_varint(&a, (uint64_t)A_DOUBLE << 3 | 1);
            buf_add(&a, &v, 8);
        }
        pb_bytes(ev, E_ANNOTATIONS, a.p, a.len);
        free(a.p);
    }
}

static size_t put_varint(unsigned char* p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* The common packets, composed in place: a slice's end, or a begin or instant with no
   attributes and names its sequence already has. 0 when the general path is needed. */
static int pf_event_fast(exporter* x, thread_state* t, int type, uint64_t ts, const opened* o, int is_open)
{
    unsigned char body[64], ev[32], packet[80];
    size_t n = 0, e = 0, k = 0;
    uint32_t gdomain = 0;
    if (!t->seq || is_open)
        return 0;
    if (type != SLICE_END) {
        gdomain = global_domain(x, o->domain);
        if (o->category != NONE32 || o->payload_type || o->name >= t->seen_names_cap
            || !t->seen_names[o->name] || gdomain >= t->seen_cats_cap || !t->seen_cats[gdomain])
            return 0;
    }
    ev[e++] = E_TYPE << 3;
    ev[e++] = (unsigned char)type;
    if (type != SLICE_END) {
        ev[e++] = E_NAME_IID << 3;
        e += put_varint(ev + e, (uint64_t)o->name + 1);
        ev[e++] = E_CATEGORY_IIDS << 3;
        e += put_varint(ev + e, (uint64_t)gdomain + 1);
        if (o->has_color) { /* the annotation {name: "color", string_value: "#rrggbb"} */
            static const unsigned char head[] = { E_ANNOTATIONS << 3 | 2, 16, A_NAME << 3 | 2, 5,
                                                  'c', 'o', 'l', 'o', 'r', A_STRING << 3 | 2, 7 };
            memcpy(ev + e, head, sizeof(head));
            color_text((char*)ev + e + sizeof(head), o->color); /* writes 7 + NUL: ev has room */
            e += sizeof(head) + 7;
        }
    }
    body[n++] = P_TIMESTAMP << 3;
    n += put_varint(body + n, ts);
    body[n++] = P_SEQ << 3;
    n += put_varint(body + n, t->seq);
    body[n++] = P_FLAGS << 3;
    body[n++] = SEQ_NEEDS_STATE;
    body[n++] = P_TRACK_EVENT << 3 | 2;
    body[n++] = (unsigned char)e;
    memcpy(body + n, ev, e);
    n += e;
    packet[k++] = 1 << 3 | 2;
    k += put_varint(packet + k, n);
    memcpy(packet + k, body, n);
    buf_add(&x->out, packet, k + n);
    flush_out(x, 0);
    return 1;
}

/* One TrackEvent packet: `type` at `ts`, on `track` (0: the sequence's thread). */
static void pf_event(exporter* x, thread_state* t, int type, uint64_t ts, uint64_t track,
                     const opened* o, int is_open)
{
    buf* ev = &x->event;
    buf interned = { NULL, 0, 0, 0 };
    if (!track && pf_event_fast(x, t, type, ts, o, is_open))
        return;
    pf_sequence(x, t);
    ev->len = 0;
    pb_uint(ev, E_TYPE, (uint64_t)type);
    if (track)
        pb_uint(ev, E_TRACK, track);
    if (type != SLICE_END) {
        uint32_t gdomain = global_domain(x, o->domain);
        pf_intern(x, t, o->name, gdomain, &interned);
        pb_uint(ev, E_NAME_IID, (uint64_t)o->name + 1);
        pb_uint(ev, E_CATEGORY_IIDS, (uint64_t)gdomain + 1);
        pf_annotations(x, ev, o);
    } else if (is_open) {
        buf a = { NULL, 0, 0, 0 };
        pb_bytes(&a, A_NAME, "open", 4);
        pb_uint(&a, A_BOOL, 1);
        pb_bytes(ev, E_ANNOTATIONS, a.p, a.len);
        free(a.p);
    }
    pb_uint(&x->packet, P_TIMESTAMP, ts);
    pb_uint(&x->packet, P_SEQ, t->seq);
    pb_uint(&x->packet, P_FLAGS, SEQ_NEEDS_STATE);
    if (interned.len)
        pb_bytes(&x->packet, P_INTERNED, interned.p, interned.len);
    pb_bytes(&x->packet, P_TRACK_EVENT, ev->p, ev->len);
    free(interned.p);
    pf_emit_packet(x);
}

/* A start/end range: a track of its own under the process, then its begin and end. */
static void pf_async(exporter* x, thread_state* t, const opened* o, uint64_t end, int is_open)
{
    uint64_t uuid = 1ull << 63 | (uint64_t)x->pid << 24 | (++x->async_id & 0xFFFFFF);
    const name* n = &x->names.items[o->name];
    buf* d = &x->scratch;
    d->len = 0;
    pb_uint(d, TD_UUID, uuid);
    pb_bytes(d, TD_NAME, n->text ? n->text : "", n->text ? n->len : 0);
    pb_uint(d, TD_PARENT, (uint64_t)x->pid << 32);
    pb_bytes(&x->packet, P_DESCRIPTOR, d->p, d->len);
    pf_emit_packet(x);
    pf_event(x, t, SLICE_BEGIN, o->start, uuid, o, 0);
    pf_event(x, t, SLICE_END, end, uuid, o, is_open);
}

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

/* The name a statistics row is keyed by: with STATS_CLASS, "a.b.3.attn (MultiheadAttention)"
   folds into "MultiheadAttention" (as summary.class_name does); other names stay. */
static uint32_t stat_name(exporter* x, uint32_t id)
{
    const name* n;
    const char *text, *open;
    if (!(x->stats_mode & STATS_CLASS))
        return id;
    if (id < x->folded_cap && x->folded[id] != NONE32)
        return x->folded[id];
    if (!grow_map(&x->folded, &x->folded_cap, id))
        return id;
    n = &x->names.items[id];
    text = n->text ? n->text : "";
    open = n->len > 3 && text[n->len - 1] == ')' ? memrchr(text, '(', n->len) : NULL;
    if (open && open > text && open[-1] == ' ' && !memchr(open + 1, ')', (size_t)(text + n->len - 1 - open - 1))
        && open + 1 < text + n->len - 1) {
        uint32_t domain = n->domain;
        uint32_t folded = intern(&x->names, domain, open + 1, (size_t)(text + n->len - 1 - (open + 1)));
        x->folded[id] = folded;
        return folded;
    }
    x->folded[id] = id;
    return id;
}

static uint64_t stats_group(exporter* x, const thread_state* t)
{
    return x->stats_mode & STATS_BY_THREAD ? thread_uuid(x->pid, t->tid) : x->group;
}

/* Counts a statistics instance: 0 while it is among the thread's first `skip_first` of its row. */
static int count_instance(exporter* x, thread_state* t, int64_t r, uint64_t duration, uint64_t self, int is_open)
{
    if (r < 0)
        return 0;
    if (x->skip_first) {
        if ((size_t)r >= t->row_seen_cap) {
            size_t n = t->row_seen_cap ? t->row_seen_cap : 64;
            uint32_t* p;
            while (n <= (size_t)r)
                n *= 2;
            if (!(p = realloc(t->row_seen, n * sizeof(*p))))
                return 0;
            memset(p + t->row_seen_cap, 0, (n - t->row_seen_cap) * sizeof(*p));
            t->row_seen = p;
            t->row_seen_cap = n;
        }
        if (t->row_seen[r]++ < x->skip_first) {
            x->st.rows[r].seen++;
            return 0;
        }
    }
    stats_add(&x->st.rows[r], duration, self, is_open);
    return 1;
}

/* A push/pop range ends: statistics (self time, tree rows), JSON, Perfetto. */
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

static uint32_t load32(const char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t load64(const char* p) { uint64_t v; memcpy(&v, p, 8); return v; }

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
static void close_open(exporter* x)
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
static int read_sections(exporter* x)
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
static void find_windows(exporter* x)
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

/* ---- the ctypes face ---- */

static void reset_file_state(exporter* x)
{
    size_t i;
    for (i = 0; i < x->nthreads; ++i) {
        free(x->threads[i].stack);
        free(x->threads[i].seen_names);
        free(x->threads[i].seen_cats);
        free(x->threads[i].row_seen);
    }
    free(x->threads);
    free(x->cats);
    free(x->domain_map);
    free(x->string_map);
    x->threads = NULL;
    x->nthreads = 0;
    x->cats = NULL;
    x->ncats = 0;
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
    x->skip_first = skip_first;
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
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
    size_t i;
    void* map;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || st.st_size < 64) {
        close(fd);
        return -EILSEQ;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -errno;
    madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
    memset(x->info, 0, sizeof(x->info));
    x->data = map;
    x->size = (size_t)st.st_size;
    x->pid = load32(x->data + 16);
    x->group = group;
    x->flush_ns = load64(x->data + 24);
    x->ended_normally = 0;
    x->outside = 0;
    if (memcmp(x->data, "ANVTXREC", 8) == 0 && load32(x->data + 8) == 2)
        find_windows(x);
    rc = memcmp(x->data, "ANVTXREC", 8) == 0 && load32(x->data + 8) == 2 ? read_sections(x) : -EILSEQ;
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
    if (rc == 0)
        close_open(x);
    if (x->stats_mode) {
        for (i = 0; i < x->nthreads; ++i)
            if (x->threads[i].first != UINT64_MAX)
                stats_span(&x->st, stats_group(x, &x->threads[i]), x->threads[i].first, x->threads[i].last);
    }
    x->info[I_FLUSH] = x->flush_ns;
    x->info[I_ENDED] = (uint64_t)x->ended_normally;
    if (info)
        memcpy(info, x->info, sizeof(x->info));
    munmap(map, x->size);
    x->data = NULL;
    reset_file_state(x);
    flush_out(x, 1);
    return rc ? rc : x->out.failed ? -EIO : 0;
}

/* Events of the last file streamed that were left out: they began outside its capture windows. */
EXPORT uint64_t autonvtx_export_outside(void* handle)
{
    return ((exporter*)handle)->outside;
}

EXPORT int autonvtx_export_close(void* handle)
{
    exporter* x = handle;
    int rc = 0;
    flush_out(x, 1);
    if (x->out.failed)
        rc = -EIO;
    if (x->json && fclose(x->json) != 0)
        rc = -errno;
    if (x->pftrace && fclose(x->pftrace) != 0)
        rc = -errno;
    x->json = x->pftrace = NULL;
    return rc;
}

static uint64_t select_kth(uint64_t* a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t pivot = a[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                ++i;
            while (a[j] > pivot)
                --j;
            if (i <= j) {
                uint64_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                ++i;
                if (j == 0)
                    break;
                --j;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

EXPORT size_t autonvtx_export_rows(void* handle) { return ((exporter*)handle)->st.count; }

/* out: group, parent row + 1 (0: none), depth, count, total, self, min, max, open, name id,
   domain id, seen; fout: mean, median, variance (sample, n - 1: its root is nsys's StdDev). */
EXPORT void autonvtx_export_row(void* handle, size_t i, uint64_t out[12], double fout[3])
{
    exporter* x = handle;
    row* r = &x->st.rows[i];
    long double n = (long double)r->count, spread;
    out[0] = r->group;
    out[1] = (uint64_t)(r->parent + 1);
    out[2] = r->depth;
    out[3] = r->count;
    out[4] = r->total;
    out[5] = r->self;
    out[6] = r->count ? r->min : 0;
    out[7] = r->max;
    out[8] = r->open;
    out[9] = r->name;
    out[10] = x->names.items[r->name].domain;
    out[11] = r->seen;
    fout[0] = r->count ? (double)r->total / (double)r->count : 0.0;
    fout[1] = 0.0;
    if (r->count) {
        size_t m = r->count / 2;
        uint64_t hi = select_kth(r->durations, r->count, m);
        fout[1] = (double)hi;
        if (r->count % 2 == 0)
            fout[1] = ((double)select_kth(r->durations, m, m - 1) + (double)hi) / 2.0;
    }
    spread = n * r->sumsq - (long double)r->total * (long double)r->total;
    fout[2] = r->count > 1 && spread > 0 ? (double)(spread / (n * (n - 1))) : 0.0;
}

/* which 0: a range name, 1: a domain. */
EXPORT const char* autonvtx_export_text(void* handle, uint32_t id, int which)
{
    exporter* x = handle;
    interner* t = which ? &x->domains : &x->names;
    return id < t->count && t->items[id].text ? t->items[id].text : "";
}

EXPORT size_t autonvtx_export_group_spans(void* handle, size_t i, uint64_t out[3])
{
    exporter* x = handle;
    if (i < x->st.ngroups) {
        out[0] = x->st.groups[i].group;
        out[1] = x->st.groups[i].first;
        out[2] = x->st.groups[i].last;
    }
    return x->st.ngroups;
}

EXPORT void autonvtx_export_free(void* handle)
{
    exporter* x = handle;
    size_t i;
    if (!x)
        return;
    autonvtx_export_close(x);
    reset_file_state(x);
    free(x->windows);
    for (i = 0; i < x->st.count; ++i)
        free(x->st.rows[i].durations);
    free(x->st.rows);
    free(x->st.slots);
    free(x->st.groups);
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
