/* The flight recorder's windows: the events around a slow instance, read from the ring and
   written as a recording of their own (flight-N/<pid>.anr) with what fired (flight-N/flight.json). */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "flight.h"

#include <stdarg.h>

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

/* One line on stderr (a single write: the program's own output is not cut). */
static void say(const char* line, int n, size_t cap)
{
    if (n > 0 && write(2, line, (size_t)n < cap ? (size_t)n : cap - 1) < 0)
        return;
}

/* The window's events into dir/<pid>.anr (dir/<pid>.anr.tmp, renamed once whole); 0 or an errno. */
static int write_recording(const char* dir, window* w, uint64_t now)
{
    char path[4300], final[4300];
    thread_buffer* b;
    writer out;
    file_cursor everything;
    int fd;
    snprintf(path, sizeof(path), "%s/%d.anr.tmp", dir, (int)g_pid);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
        return errno;
    out = (writer){ fd, g_write_buffer, 0, 0, 0 };
    memset(&everything, 0, sizeof(everything));
    write_header(&out);
    write_registries(&out, &everything);
    for (b = g_threads; b; b = b->next) {
        chunk* c = atomic_load_explicit(&b->head, memory_order_acquire);
        chunk* next;
        /* Starts before the window are not wanted: chunks that end before it are skipped. */
        while (c && (next = atomic_load_explicit(&c->next, memory_order_acquire)) != NULL
               && atomic_load_explicit(&next->used, memory_order_acquire) >= sizeof(anr_record_head)
               && record_ts(next->data) < w->from)
            c = next;
        if (c)
            walk(c, 0, NULL, 0, collect_start, w);
    }
    for (b = g_threads; b; b = b->next)
        window_thread(&out, w, b);
    section(&out, ANR_T_SPILL, ANR_SPILL_BYTES); /* final: ranges still open end at `now` */
    put_u64(&out, now);
    put_u64(&out, (uint64_t)realtime_offset());
    put_u64(&out, 0);
    put_u64(&out, 0);
    put_u64(&out, 0);
    put_u32(&out, 1);
    put_u32(&out, 0);
    drain(&out);
    close(fd);
    snprintf(final, sizeof(final), "%s/%d.anr", dir, (int)g_pid);
    if (!out.failed && rename(path, final) != 0)
        out.failed = errno;
    if (out.failed)
        unlink(path);
    return out.failed;
}

static uint64_t window_ns(const window* w, uint64_t ts) { return w->conv.on ? convert_ts(&w->conv, ts) : ts; }

/* dir/flight.json: what fired and what the window holds (written last: the window is complete). */
static void write_info(const char* dir, uint32_t number, const trigger* t, const window* w, uint32_t in_window,
                       int ring_cut, int failed, uint64_t write_ns, uint64_t write_cpu_ns)
{
    char path[4300];
    double per_tick = ns_per_tick();
    bytes info = { NULL, 0, 0 };
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
                (unsigned long long)window_ns(w, w->from), (unsigned long long)window_ns(w, w->to),
                (unsigned long long)window_ns(w, t->start), ring_cut ? "true" : "false",
                (unsigned long long)w->still_open, (unsigned long long)w->enclosing,
                (unsigned long long)w->enclosing_unnamed, failed ? "false" : "true", failed,
                (unsigned long long)write_ns, (unsigned long long)write_cpu_ns);
    if (w->info_enclosing.len)
        bytes_add(&info, w->info_enclosing.p, w->info_enclosing.len);
    bytes_add(&info, "]}\n", 3);
    snprintf(path, sizeof(path), "%s/flight.json", dir);
    if (info.p)
        write_file(path, info.p, info.len);
    free(info.p);
}

/* The line that says which instance, how slow, against which median, and where it goes. */
static void say_fired(const trigger* t, uint32_t number, uint32_t in_window, int failed)
{
    char line[1024], took[32], med[32];
    double per_tick = ns_per_tick();
    double times = t->median ? (double)(t->end - t->start) / (double)t->median : 0.0;
    int n;
    say_duration(took, sizeof(took), (double)(t->end - t->start) * per_tick);
    say_duration(med, sizeof(med), (double)t->median * per_tick);
    if (failed)
        n = snprintf(line, sizeof(line),
                     "autonvtx: flight: '%s' took %s, %.1fx the median %s; could not write its window: %s\n", t->name,
                     took, times, med, strerror(failed));
    else
        n = snprintf(line, sizeof(line),
                     "autonvtx: flight: '%s' (instance %llu of '%s') took %s, %.1fx the median %s of the %llu before it;"
                     " it and the %u before it go to %s.flight-%u%s\n",
                     t->name, (unsigned long long)t->ordinal, g_shown_range, took, times, med,
                     (unsigned long long)t->measured, in_window - 1, g_out_head, number, g_out_tail);
    say(line, n, sizeof(line));
}

void write_window(const trigger* t)
{
    char dir[4200], line[1024];
    uint64_t tsc = 0, now = 0, held, began = now_ns(), began_cpu = thread_cpu_ns();
    uint32_t number, in_window = t->in_window;
    window w;
    int failed;

    if (!(number = claim_number(dir, sizeof(dir)))) {
        if (!g_said_max) {
            g_said_max = 1;
            say(line,
                snprintf(line, sizeof(line),
                         "autonvtx: flight: %u files written (--flight-max): later slow instances of '%s' are not written\n",
                         g_max_files, g_shown_range),
                sizeof(line));
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
    failed = write_recording(dir, &w, now);
    write_info(dir, number, t, &w, in_window, held > t->window_start, failed, now_ns() - began,
               thread_cpu_ns() - began_cpu);
    say_fired(t, number, in_window, failed);
    free(w.info_enclosing.p);
    free(w.records.p);
    free(w.stack);
    free(w.pushes);
    free(w.starts);
}

/* Frees the oldest written chunks (of any thread) while the ring holds more than its bytes. */
void trim_ring(void)
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

