/* The exporter's reader: walks a recording's sections, decodes its records and registries, and
   finds its capture windows. A damaged file is read for all it holds: nothing is read past the
   mapping or a section's end, an id is trusted only as far as the file could hold it, and a
   record that cannot be decoded ends only its own section (what was skipped is counted). */
#include "export.h"

/* A category's global id: its registered name in the event's domain (the last one given), else
   its number as text. */
static uint32_t category_of(exporter* x, uint32_t domain, uint32_t number)
{
    uint32_t id = u64map_get(&x->cats, (uint64_t)domain << 32 | number);
    char text[16];
    if (id != NONE32)
        return id;
    snprintf(text, sizeof(text), "%u", number);
    return intern(&x->categories, 0, text, strlen(text));
}

/* A record's name: its inline text, its registered string, else "" (also for an unknown id). */
static uint32_t message_of(exporter* x, uint32_t domain, uint8_t kind, const char* p)
{
    uint32_t s;
    if (kind == ANR_M_INLINE)
        return intern(&x->names, global_domain(x, domain), p + 4, load32(p));
    if (kind == ANR_M_REGISTERED) {
        s = load32(p);
        if (s < x->string_map_cap && x->string_map[s] != NONE32)
            return x->string_map[s];
    }
    return intern(&x->names, global_domain(x, domain), "", 0);
}

/* Decodes one record at p (at most `avail` bytes) into `o`; returns its size, 0 if corrupt (an
   unknown kind, or a record running past `avail`). anr_record_size has checked that every
   field lies within `avail` before any is read. */
static size_t decode(exporter* x, const char* p, size_t avail, opened* o, uint64_t* id)
{
    anr_record_head h;
    size_t size = anr_record_size(p, avail), n = sizeof(h);
    if (size == 0)
        return 0;
    memcpy(&h, p, sizeof(h));
    if (h.kind < ANR_K_PUSH || h.kind > ANR_K_MARK)
        return 0;
    memset(o, 0, sizeof(*o));
    o->domain = h.domain;
    o->start = h.ts;
    o->category = NONE32;
    if (h.kind == ANR_K_START || h.kind == ANR_K_END) {
        *id = load64(p + n);
        n += 8;
    }
    if (h.kind == ANR_K_POP || h.kind == ANR_K_END)
        return size;
    if (h.payload_type) {
        o->payload_type = h.payload_type;
        o->payload = load64(p + n);
        n += 8;
    }
    if (h.flags & ANR_F_COLOR) {
        o->has_color = 1;
        o->color = load32(p + n);
        n += 4;
    }
    if (h.flags & ANR_F_CATEGORY) {
        o->category = category_of(x, o->domain, load32(p + n));
        n += 4;
    }
    o->name = message_of(x, o->domain, h.message_kind, p + n);
    return size;
}

/* The events of one THREAD section (at least its head). A record that cannot be
   decoded ends the section: the bytes from it on are counted as skipped. In a section the
   process's end cut short (`cut`), the record the cut went through is no damage: its bytes
   join the write's lost part, and every whole record before it is kept. */
static void read_thread(exporter* x, const char* p, size_t n, int cut)
{
    uint32_t tid = load32(p), index = load32(p + 4), name_len = load32(p + 24), flags = load32(p + 28);
    size_t pos = ANR_THREAD_HEAD_BYTES + ANR_ALIGN8((size_t)name_len);
    thread_state* t = thread_of(x, index, tid, flags);
    if (!t)
        return;
    while (pos < n) {
        opened o;
        uint64_t id = 0;
        size_t size = decode(x, p + pos, n - pos, &o, &id);
        if (size == 0) {
            if (cut && anr_record_size(p + pos, n - pos) == 0) {
                x->cut_lost_bytes += n - pos;
                return;
            }
            x->corrupt_records++;
            x->skipped_bytes += n - pos;
            return;
        }
        /* A thread's records are in time order, none later than the file's last write: a time
           outside that is damage (an end before its start once made a 584-year range). The ends
           of start/end ranges are the exception (a merged trace writes them after every start,
           in sections of their own): on_end refuses one before its start. */
        if ((o.start < t->last && (uint8_t)p[pos] != ANR_K_END) ||
            (x->latest_write_ns != 0 && o.start > x->latest_write_ns + TIME_SLACK_NS)) {
            x->impossible_times++;
            pos += size;
            continue;
        }
        pair_event(x, t, (uint8_t)p[pos], &o, id);
        x->cut_kept_events += cut != 0;
        pos += size;
    }
}

/* Whether a registry id can be real: ids count up from 1, and each entry takes 8 bytes or more
   of the file, so a larger one is damage (trusting it would size a map by it). */
static int plausible_id(exporter* x, uint32_t id)
{
    if ((size_t)id <= x->size / 8)
        return 1;
    x->bad_entries++;
    return 0;
}

static void read_named(exporter* x, uint32_t tag, uint32_t a, uint32_t b, const char* text, uint32_t len)
{
    if (tag == ANR_T_STRINGS) {
        if (plausible_id(x, a) && grow_map(&x->string_map, &x->string_map_cap, a))
            x->string_map[a] = intern(&x->names, global_domain(x, b), text, len);
    } else if (tag == ANR_T_CATEGORIES) {
        u64map_put(&x->cats, (uint64_t)a << 32 | b, intern(&x->categories, 0, text, len));
    }
}

/* Registries: domains, strings and categories, mapped to global ids. An entry running past the
   section ends it (counted as skipped). */
static void read_registry(exporter* x, uint32_t tag, const char* p, size_t n, int cut)
{
    size_t pos = 0;
    while (pos + 8 <= n) {
        uint32_t a = load32(p + pos), b = load32(p + pos + 4), len;
        if (tag == ANR_T_DOMAINS) {
            if (b > n - pos - 8)
                break;
            if (plausible_id(x, a) && grow_map(&x->domain_map, &x->domain_map_cap, a))
                x->domain_map[a] = intern(&x->domains, 0, p + pos + 8, b);
            pos += 8 + ANR_ALIGN8((size_t)b);
            continue;
        }
        if (pos + 16 > n || (len = load32(p + pos + 8)) > n - pos - 16)
            break;
        read_named(x, tag, a, b, p + pos + 16, len);
        pos += 16 + ANR_ALIGN8((size_t)len);
    }
    if (pos < n && cut) {
        x->cut_lost_bytes += n - pos; /* the entry the process's end cut through */
    } else if (pos < n) {
        x->corrupt_records++;
        x->skipped_bytes += n - pos;
    }
}

/* Sections a write cut short still yields entries of, whole ones before the cut: a thread's
   events (once its head is whole) and the registries. */
static int readable_when_cut(uint32_t tag, size_t avail)
{
    if (tag == ANR_T_THREAD)
        return avail >= ANR_THREAD_HEAD_BYTES;
    return tag == ANR_T_DOMAINS || tag == ANR_T_STRINGS || tag == ANR_T_CATEGORIES;
}

/* The section at `pos`: 1 with its tag, body and length; 0 at the end (an END tag, the file's
   end, or a section cut short that holds nothing readable: `skipped` gets its bytes). A last
   section cut short (the process ended while writing it) that holds whole entries is returned
   with the bytes it has as its length, and `missing` gets the bytes the write did not reach. */
static int section_at(const exporter* x, size_t pos, uint32_t* tag, const char** body, uint64_t* len,
                      uint64_t* missing, size_t* skipped)
{
    size_t avail;
    *missing = 0;
    *skipped = 0;
    if (pos + ANR_SECTION_HEAD_BYTES > x->size)
        return 0;
    *tag = load32(x->data + pos);
    *len = load64(x->data + pos + 8);
    *body = x->data + pos + ANR_SECTION_HEAD_BYTES;
    if (*tag == ANR_T_END)
        return 0;
    avail = x->size - pos - ANR_SECTION_HEAD_BYTES;
    if (*len > avail) {
        if (!readable_when_cut(*tag, avail)) {
            *skipped = x->size - pos;
            return 0;
        }
        *missing = *len - avail;
        *len = avail;
    }
    return 1;
}

#define EACH_SECTION(x, pos, tag, body, len, missing, skipped) \
    for (pos = load32((x)->data + 12); section_at(x, pos, &tag, &body, &len, &missing, &skipped); \
         pos += ANR_SECTION_HEAD_BYTES + len)

/* Walks the sections to the file's end. A last one cut short is read for its whole entries
   (what the write did not reach is counted); one with none is left out (and counted). */
void read_sections(exporter* x)
{
    size_t pos, skipped;
    uint32_t tag;
    uint64_t len, missing;
    const char* body;
    EACH_SECTION(x, pos, tag, body, len, missing, skipped) {
        if (missing) {
            x->cut_write = 1;
            x->cut_lost_bytes += missing;
        }
        if (tag == ANR_T_THREAD && len >= ANR_THREAD_HEAD_BYTES)
            read_thread(x, body, len, missing != 0);
        else if (tag == ANR_T_CATEGORIES) /* domains and strings: read by find_windows, first */
            read_registry(x, tag, body, len, missing != 0);
        else if (tag == ANR_T_SPILL && len >= ANR_SPILL_BYTES) {
            if (load64(body) > x->flush_ns)
                x->flush_ns = load64(body);
            x->ended_normally |= load32(body + 40) != 0;
        }
    }
    x->skipped_bytes += skipped;
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
    size_t pos = ANR_THREAD_HEAD_BYTES + ANR_ALIGN8((size_t)load32(p + 24)), i;
    while (pos < n) {
        opened o;
        uint64_t id = 0;
        uint8_t kind = (uint8_t)p[pos];
        size_t size = decode(x, p + pos, n - pos, &o, &id);
        if (size == 0)
            return;
        pos += size;
        if (kind == ANR_K_START && o.name == capture) {
            void* grown = realloc(*open, (*nopen + 1) * sizeof(**open));
            if (!grown)
                return;
            *open = grown;
            (*open)[*nopen][0] = id;
            (*open)[(*nopen)++][1] = o.start;
        } else if (kind == ANR_K_END) {
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
   string, opened by regions' capture windows). A first walk reads the domain and string
   registries (for the whole file: read_sections does not read them again); the events
   are decoded twice only when the file registered that string. A window still open at the
   file's end lasts to its end. */
void find_windows(exporter* x)
{
    size_t pos, skipped, i, nopen = 0;
    uint32_t domain = intern(&x->domains, 0, "autonvtx", 8), capture, s, tag;
    uint64_t (*open)[2] = NULL, len, missing;
    const char* body;
    int registered = 0;
    capture = intern(&x->names, domain, "capture", 7);
    EACH_SECTION(x, pos, tag, body, len, missing, skipped) {
        if (tag == ANR_T_DOMAINS || tag == ANR_T_STRINGS)
            read_registry(x, tag, body, len, missing != 0);
        else if (tag == ANR_T_SPILL && len >= ANR_SPILL_BYTES && load64(body) > x->latest_write_ns)
            x->latest_write_ns = load64(body); /* read_thread's bound on a record's time */
    }
    for (s = 0; s < x->string_map_cap && !registered; ++s)
        registered = x->string_map[s] == capture;
    if (!registered)
        return;
    EACH_SECTION(x, pos, tag, body, len, missing, skipped)
        if (tag == ANR_T_THREAD && len >= ANR_THREAD_HEAD_BYTES)
            scan_thread_windows(x, body, len, capture, &open, &nopen);
    for (i = 0; i < nopen; ++i)
        add_window(x, open[i][1], UINT64_MAX);
    free(open);
}
