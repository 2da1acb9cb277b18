/* The exporter's Perfetto writer: TracePackets hand-encoded (field numbers from perfetto's trace
   proto), one sequence per thread with its names interned on it. */
#include "export.h"

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

/* ---- Perfetto TracePackets (hand-encoded; field numbers from perfetto's trace proto) ---- */

enum {
    P_TIMESTAMP = 8, P_SEQ = 10, P_TRACK_EVENT = 11, P_INTERNED = 12, P_FLAGS = 13,
    P_DEFAULTS = 59, P_DESCRIPTOR = 60, D_TIMESTAMP_CLOCK = 58, D_TRACK_EVENT = 11,
    E_TYPE = 9, E_TRACK = 11, E_NAME_IID = 10, E_CATEGORY_IIDS = 3, E_ANNOTATIONS = 4,
    A_NAME = 10, A_BOOL = 2, A_UINT = 3, A_INT = 4, A_DOUBLE = 5, A_STRING = 6,
    I_CATEGORIES = 1, I_NAMES = 2, TD_UUID = 1, TD_NAME = 2, TD_PARENT = 5,
    CLOCK_MONOTONIC_ID = 3, SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2
};

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
void pf_event(exporter* x, thread_state* t, int type, uint64_t ts, uint64_t track,
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
void pf_async(exporter* x, thread_state* t, const opened* o, uint64_t end, int is_open)
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
