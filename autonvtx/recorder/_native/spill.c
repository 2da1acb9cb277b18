/* The recording on disk: the spiller thread's periodic writes to the live file, the final write
   at exit or on request (autonvtx_recorder_flush), and whole copies to other paths. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

/*
 * The spiller: a thread that hands this process's events to its file every SPILL_PERIOD_MS, so
 * that a process ended by SIGKILL or os._exit() loses at most that much. It is stopped before a
 * fork (a fork child would not have it anyway, and CPython 3.12+ warns at os.fork() in a process
 * that has other threads) and started again by the next chunk a thread of the process takes.
 * A process recording fast (SPILL_NUDGE_BYTES of chunks taken in less than the period) wakes it
 * sooner: each write stays short, so the one SIGTERM begins ends before a SIGKILL that follows
 * 20 ms later (timeout -k, Slurm, torchrun), and a write a kill cuts loses little (readers keep
 * what it wrote before the cut). Under a memory bound smaller than that, the bound decides.
 */
#define SPILL_PERIOD_MS 100
#define SPILL_NUDGE_BYTES (3u << 20)
static _Atomic size_t g_bytes_unwritten; /* bytes of the chunks taken since the last write */
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

void ensure_spiller(void)
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

/* A thread took a chunk of `bytes`: past SPILL_NUDGE_BYTES since the last write, the spiller
   writes now rather than at its period's end. */
void spill_nudge(size_t bytes)
{
    if (atomic_fetch_add_explicit(&g_bytes_unwritten, bytes, memory_order_relaxed) + bytes >= SPILL_NUDGE_BYTES
        && atomic_load_explicit(&g_spiller_pid, memory_order_relaxed) == g_pid)
        pthread_cond_signal(&g_spiller_cond);
}

void stop_spiller(void)
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

/* ---- writing the recording: spills to the per-process file, explicit flushes ---- */

char g_write_buffer[WRITE_BUFFER]; /* writers run under g_lock, one at a time */

void drain(writer* w)
{
    size_t done = 0;
    if (w->fd < 0) { /* a write that keeps nothing (--flight without --summary) */
        w->len = 0;
        return;
    }
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

void put(writer* w, const void* p, size_t n)
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

void put_u32(writer* w, uint32_t v) { put(w, &v, 4); }
void put_u64(writer* w, uint64_t v) { put(w, &v, 8); }

void pad(writer* w, size_t n)
{
    static const char zeros[8] = { 0 };
    put(w, zeros, ANR_ALIGN8(n) - n);
}

void section(writer* w, uint32_t tag, uint64_t length)
{
    put_u32(w, tag);
    put_u32(w, 0);
    put_u64(w, length);
}

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

int64_t realtime_offset(void)
{
    struct timespec mono, real;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll
         + ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
}

void write_header(writer* w)
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

void write_registries(writer* w, file_cursor* cur)
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
        if (g_flight && !failed) { /* the flight ring keeps written chunks (flight_trim frees them) */
            flight_scan(b, b->spill_chunk ? b->spill_chunk : c, b->spill_chunk ? b->spill_off : 0,
                        b->written_chunk, b->written_used);
            c = NULL;
        }
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
    /* O_NONBLOCK: something put in the file's place (a FIFO) must fail the open, not block the
     * program's exit forever; on a regular file it changes nothing. */
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | (fresh ? O_CREAT | O_TRUNC : 0), 0666);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        close(fd);
        return -ESTALE; /* not the file this process writes: what it held is gone */
    }
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
    if (g_flight && !g_flight_spill) { /* the flight ring only: what is written is scanned, not kept */
        write_spill(&w, &g_spill_cursor, 1, final, out);
        release_written(0);
        flight_after_spill();
        if (final)
            spare_drain();
        if (out)
            out[2] = 0;
        return 0;
    }
    fd = open_live_file(&w, &size);
    if (fd < 0)
        return fd;
    write_spill(&w, &g_spill_cursor, 1, final, out);
    drain(&w);
    release_written(w.failed);
    if (g_flight)
        flight_after_spill();
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
    atomic_store_explicit(&g_bytes_unwritten, 0, memory_order_relaxed);
    pthread_mutex_lock(&g_lock);
    if (atomic_load(&g_attached))
        spill_locked(0, NULL);
    pthread_mutex_unlock(&g_lock);
}

/* At unload: the live file ends with a final SPILL section, unless it already does. */
void finish_spill_file(void)
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
    if (rc != 0 || !spill_path(path, sizeof(path)) || (in = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
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

/* In a fork child: the parent's live file and spiller are not the child's. */
void spill_reset_in_child(void)
{
    reset_spill_file();
    pthread_mutex_init(&g_spiller_lock, NULL);
    pthread_cond_init(&g_spiller_cond, NULL);
}
