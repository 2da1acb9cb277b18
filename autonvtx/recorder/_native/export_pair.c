/* The exporter's pairing: pushes with pops (per domain, as NVTX keeps its stacks) and starts
   with ends, each finished range handed to the statistics and the writers. Every event costs
   O(1) whatever the nesting, the number of domains or of stray pops. */
#include "export.h"

thread_state* thread_of(exporter* x, uint32_t index, uint32_t tid, uint32_t flags)
{
    uint32_t at = u64map_get(&x->thread_at, index);
    thread_state* t;
    if (at != NONE32) {
        x->threads[at].wrapped |= (int)(flags & 1);
        return &x->threads[at];
    }
    t = realloc(x->threads, (x->nthreads + 1) * sizeof(*t));
    if (!t)
        return NULL;
    x->threads = t;
    if (!u64map_put(&x->thread_at, index, (uint32_t)x->nthreads))
        return NULL;
    t = &t[x->nthreads++];
    memset(t, 0, sizeof(*t));
    t->index = index;
    t->tid = tid;
    t->first = t->span_first = UINT64_MAX;
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
    if (x->stats_mode && !o->warm && o->row >= 0) {
        uint32_t open = u64map_get(&t->open_rows, (uint64_t)o->row);
        open = open == NONE32 || open == 0 ? 0 : open - 1;
        u64map_put(&t->open_rows, (uint64_t)o->row, open);
        count_instance(x, t, o->row, o->start, o->start + duration, duration > o->child ? duration - o->child : 0,
                       is_open, open == 0);
    }
    if (x->json)
        json_range(x, t->tid, o, end, is_open);
    if (x->pftrace)
        pf_event(x, t, SLICE_END, end, 0, o, is_open);
    x->info[I_RANGES]++;
    x->info[I_OPEN] += is_open != 0;
}

/* The innermost open range of a domain (1 + its stack index, 0: none). The last domain used
   is kept out of the map: most threads push and pop in one domain, and then never hash. */
static uint32_t top_of(const thread_state* t, uint32_t domain)
{
    uint32_t top;
    if (t->has_hot && t->hot_domain == domain)
        return t->hot_top;
    top = u64map_get(&t->tops, domain);
    return top == NONE32 ? 0 : top;
}

static int set_top(thread_state* t, uint32_t domain, uint32_t top)
{
    if (!t->has_hot || t->hot_domain != domain) {
        if (t->has_hot && !u64map_put(&t->tops, t->hot_domain, t->hot_top))
            return 0;
        t->hot_domain = domain;
        t->has_hot = 1;
    }
    t->hot_top = top;
    return 1;
}

static void on_push(exporter* x, thread_state* t, opened* o)
{
    uint32_t below = top_of(t, o->domain);
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        opened* s = realloc(t->stack, cap * sizeof(*s));
        if (!s)
            return;
        t->stack = s;
        t->cap = cap;
    }
    if (t->depth >= NONE32 - 1 || !set_top(t, o->domain, (uint32_t)t->depth + 1))
        return;
    o->row = -1;
    o->warm = 0;
    o->outside = !in_window(x, o->start);
    o->below = below;
    if (x->stats_mode & STATS_TREE) { /* a range outside the windows still holds its children's rows */
        int64_t parent = t->depth ? t->stack[t->depth - 1].row : -1;
        o->row = stats_row(&x->st, stats_group(x, t), parent, stat_name(x, o->name), (uint32_t)t->depth);
    } else if (x->stats_mode && !o->outside) {
        o->row = stats_row(&x->st, stats_group(x, t), -1, stat_name(x, o->name), 0);
    }
    if (x->stats_mode && !o->outside) {
        uint32_t open;
        o->warm = (uint8_t)is_warm_up(x, t, o->row, o->name);
        /* How many counted instances of its row this one is inside: none, and its time is the row's. */
        if (o->row >= 0 && !o->warm) {
            open = u64map_get(&t->open_rows, (uint64_t)o->row);
            u64map_put(&t->open_rows, (uint64_t)o->row, open == NONE32 ? 1 : open + 1);
        }
    }
    t->stack[t->depth++] = *o;
    if (x->pftrace && !o->outside)
        pf_event(x, t, SLICE_BEGIN, o->start, 0, o, 0);
}

/* Drops the ranges on top of the stack already popped under another domain's open range. */
static void drop_closed(thread_state* t)
{
    while (t->depth > 0 && t->stack[t->depth - 1].closed)
        t->depth--;
}

/* A pop ends the innermost open range of its domain: found through `tops`, not by scanning
   the stack. Below the top it is only marked closed, and leaves the stack with the top. */
static void on_pop(exporter* x, thread_state* t, uint32_t domain, uint64_t ts)
{
    uint32_t top = top_of(t, domain);
    opened o;
    if (top == 0) {
        t->unmatched++;
        return;
    }
    o = t->stack[top - 1];
    if (!set_top(t, domain, o.below))
        return;
    if (top == t->depth) {
        t->depth--;
        drop_closed(t);
    } else {
        t->stack[top - 1].closed = 1;
    }
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
    if (x->stats_mode && !s->range.warm) /* start/end ranges overlap freely: each counts */
        count_instance(x, t, s->range.row, s->range.start, s->range.start + duration, duration, is_open, 1);
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
    s->range.row = -1;
    s->range.warm = 0;
    if (x->stats_mode && in_window(x, o->start)) {
        s->range.row = stats_row(&x->st, stats_group(x, t), -1, stat_name(x, o->name), 0);
        s->range.warm = (uint8_t)is_warm_up(x, t, s->range.row, o->name);
    }
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

void pair_event(exporter* x, thread_state* t, uint8_t kind, opened* o, uint64_t id)
{
    if (o->start < t->first)
        t->first = o->start;
    if (o->start > t->last)
        t->last = o->start;
    if (kind == ANR_K_PUSH)
        on_push(x, t, o);
    else if (kind == ANR_K_POP)
        on_pop(x, t, o->domain, o->start);
    else if (kind == ANR_K_START)
        on_start(x, t, id, o);
    else if (kind == ANR_K_END)
        on_end(x, t, id, o->start);
    else
        on_mark(x, t, o);
}

/* Ranges still open when the file ends: they end at its last write, flagged open. */
void close_open(exporter* x)
{
    size_t i, b;
    for (i = 0; i < x->nthreads; ++i) {
        thread_state* t = &x->threads[i];
        drop_closed(t);
        while (t->depth > 0) {
            opened o = t->stack[--t->depth];
            drop_closed(t);
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
