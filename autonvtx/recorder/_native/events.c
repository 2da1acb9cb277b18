/*
 * The recording callbacks: every NVTX event of the process lands here, on the thread that made
 * it. The hot paths (a push with a registered message, a pop) are a few stores into the thread's
 * current chunk; everything else takes the general writers below.
 */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

_Atomic uint64_t g_lost;

static __thread thread_buffer* t_buffer;

/* ---- per-thread buffers ---- */

static thread_buffer* register_thread(void)
{
    thread_buffer* b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->tid = os_tid();
    if (pthread_getname_np(pthread_self(), b->name, sizeof(b->name)) != 0)
        b->name[0] = '\0';
    pthread_mutex_lock(&g_lock);
    b->index = ++g_thread_index;
    b->next = g_threads;
    g_threads = b;
    pthread_mutex_unlock(&g_lock);
    t_buffer = b;
    return b;
}

static inline thread_buffer* buffer(void)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b))
        b = register_thread();
    return b;
}

static void drop(thread_buffer* b)
{
    if (b)
        atomic_store_explicit(&b->dropped,
            atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&g_lost, 1, memory_order_relaxed);
}

/* The calling thread's buffer, or NULL (for a fork child's reset). */
thread_buffer* current_thread_buffer(void) { return t_buffer; }

/* Space for an n-byte record (n a multiple of 8) in the thread's buffer; NULL means drop. */
static inline char* reserve(thread_buffer* b, size_t n, int closing)
{
    if (LIKELY(b->tail_used + n <= b->limit))
        return b->tail->data + b->tail_used;
    return reserve_slow(b, n, closing);
}

static inline void commit(thread_buffer* b, size_t n)
{
    b->tail_used += n;
    atomic_store_explicit(&b->tail->used, b->tail_used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- event writers ---- */

/* Fills a reserved record's head; the timestamp is taken last, once the space is ours. */
static inline void put_head(char* p, uint8_t kind, uint8_t flags, uint8_t payload_type,
                            uint8_t message_kind, uint32_t domain)
{
    anr_record_head* h = (anr_record_head*)p;
    h->kind = kind;
    h->flags = flags;
    h->payload_type = payload_type;
    h->message_kind = message_kind;
    h->domain = domain;
    h->ts = now_ts();
}

/* The event writers return 1 when the record was written, 0 when it was dropped (and counted). */
static inline int write_simple(uint8_t kind, uint32_t domain, uint64_t id)
{
    thread_buffer* b = buffer();
    size_t n = sizeof(anr_record_head) + (id ? 8 : 0);
    char* p = b ? reserve(b, n, kind == ANR_K_POP || kind == ANR_K_END) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        return 0;
    }
    put_head(p, kind, 0, 0, 0, domain);
    if (id)
        memcpy(p + sizeof(anr_record_head), &id, 8);
    commit(b, n);
    return 1;
}

/* Writes a push/start/mark with an inline message (ASCII or UTF-8) and no other attribute. */
static inline int write_text(uint8_t kind, uint32_t domain, uint64_t id, const char* text,
                             size_t len)
{
    thread_buffer* b = buffer();
    if (len > MAX_MESSAGE)
        len = MAX_MESSAGE;
    size_t n = ANR_ALIGN8(sizeof(anr_record_head) + (id ? 8 : 0) + 4 + len);
    char* p = b ? reserve(b, n, 0) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        return 0;
    }
    put_head(p, kind, 0, 0, ANR_M_INLINE, domain);
    char* q = p + sizeof(anr_record_head);
    if (id) {
        memcpy(q, &id, 8);
        q += 8;
    }
    uint32_t len32 = (uint32_t)len;
    memcpy(q, &len32, 4);
    memcpy(q + 4, text, len);
    memset(q + 4 + len, 0, (size_t)(p + n - (q + 4 + len)));
    commit(b, n);
    return 1;
}

static inline int write_wide(uint8_t kind, uint32_t domain, uint64_t id, const wchar_t* w)
{
    char tmp[1024];
    int written;
    if (!w)
        return write_text(kind, domain, id, "", 0);
    size_t wl = wcslen(w);
    if (wl * 4 <= sizeof(tmp))
        return write_text(kind, domain, id, tmp, utf8_from_wide(w, tmp, sizeof(tmp)));
    size_t cap = wl * 4 < MAX_MESSAGE ? wl * 4 : MAX_MESSAGE;
    char* big = malloc(cap);
    if (!big)
        return write_text(kind, domain, id, "", 0);
    written = write_text(kind, domain, id, big, utf8_from_wide(w, big, cap));
    free(big);
    return written;
}

/* An event's message, made ready to copy: inline UTF-8 (wide strings converted) or a string id. */
typedef struct message {
    uint8_t kind;          /* ANR_M_NONE, ANR_M_INLINE, ANR_M_REGISTERED */
    const char* text;
    size_t len;
    uint32_t string_id;
    char* big;             /* malloc'ed conversion of a long wide string, freed by the caller */
    char tmp[1024];
} message;

static inline void read_message(const nvtxEventAttributes_t* a, message* m)
{
    m->kind = ANR_M_NONE;
    m->big = NULL;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) {
        m->kind = ANR_M_INLINE;
        m->text = a->message.ascii;
        m->len = strlen(m->text);
        if (m->len > MAX_MESSAGE)
            m->len = MAX_MESSAGE;
    } else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE && a->message.unicode) {
        size_t wl = wcslen(a->message.unicode);
        char* out = m->tmp;
        size_t cap = sizeof(m->tmp);
        if (wl * 4 > cap) {
            cap = wl * 4 < MAX_MESSAGE ? wl * 4 : MAX_MESSAGE;
            out = m->big = malloc(cap);
        }
        if (out) {
            m->kind = ANR_M_INLINE;
            m->text = out;
            m->len = utf8_from_wide(a->message.unicode, out, cap);
        }
    } else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered) {
        m->kind = ANR_M_REGISTERED;
        m->string_id = ((const string_entry*)(const void*)a->message.registered)->id;
    }
}

/* Copies what follows a record's head: [id] [payload] [color] [category] [message], padded. */
static inline void put_body(char* q, char* end, uint64_t id, uint8_t flags, uint8_t payload_type,
                            const nvtxEventAttributes_t* a, const message* m)
{
    if (id) {
        memcpy(q, &id, 8);
        q += 8;
    }
    if (payload_type) {
        memcpy(q, &a->payload, 8);
        q += 8;
    }
    if (flags & ANR_F_COLOR) {
        memcpy(q, &a->color, 4);
        q += 4;
    }
    if (flags & ANR_F_CATEGORY) {
        memcpy(q, &a->category, 4);
        q += 4;
    }
    if (m->kind == ANR_M_REGISTERED) {
        memcpy(q, &m->string_id, 4);
        q += 4;
    } else if (m->kind == ANR_M_INLINE) {
        uint32_t len32 = (uint32_t)m->len;
        memcpy(q, &len32, 4);
        memcpy(q + 4, m->text, m->len);
        q += 4 + m->len;
    }
    memset(q, 0, (size_t)(end - q));
}

static inline int write_attributes(uint8_t kind, uint32_t domain, uint64_t id,
                                   const nvtxEventAttributes_t* a)
{
    if (UNLIKELY(!a))
        return write_simple(kind, domain, id);
    thread_buffer* b = buffer();
    uint8_t flags = 0, payload_type = 0;
    size_t n = sizeof(anr_record_head) + (id ? 8 : 0);
    message m;

    if (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 && a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT) {
        payload_type = (uint8_t)a->payloadType;
        n += 8;
    }
    if (a->colorType == NVTX_COLOR_ARGB) {
        flags |= ANR_F_COLOR;
        n += 4;
    }
    if (a->category != 0) {
        flags |= ANR_F_CATEGORY;
        n += 4;
    }
    read_message(a, &m);
    n = ANR_ALIGN8(n + (m.kind == ANR_M_INLINE ? 4 + m.len : m.kind == ANR_M_REGISTERED ? 4 : 0));
    char* p = b ? reserve(b, n, 0) : NULL;
    if (UNLIKELY(!p)) {
        drop(b);
        free(m.big);
        return 0;
    }
    put_head(p, kind, flags, payload_type, m.kind, domain);
    put_body(p + sizeof(anr_record_head), p + n, id, flags, payload_type, a, &m);
    commit(b, n);
    free(m.big);
    return 1;
}

static inline uint64_t new_range_id(void)
{
    thread_buffer* b = buffer();
    if (UNLIKELY(!b))
        return 0;
    return ((uint64_t)b->index << 40) | ++b->next_seq;
}

/*
 * Whole ranges or nothing. Once a push is left out (the budget refused it), its pop must be left
 * out too, and so must every push opened until then and its pop: a kept push whose pop is lost
 * would last until the end of the recording, and a pop whose push is lost would end the range
 * around it. Per domain (pushes and pops nest within a domain), the thread counts the pops it
 * owes; while it owes any, every push is left out (and owes its pop), and a pop in a domain that
 * owes one is left out and pays it. Kept pushes get their pops (reserve_slow). Marks and
 * start/end ranges go on meanwhile: they nest in nothing.
 */
static void owe_pop(thread_buffer* b, uint32_t domain)
{
    uint32_t i;
    b->owed_total++;
    b->limit = 0; /* the inline paths step aside until every owed pop came */
    for (i = 0; i < b->owed_len; ++i) {
        if (b->owed[i].domain == domain) {
            b->owed[i].count++;
            return;
        }
    }
    if (b->owed_len == b->owed_cap) {
        uint32_t cap = b->owed_cap ? b->owed_cap * 2 : 4;
        owed_pop* grown = realloc(b->owed, cap * sizeof(*grown));
        if (!grown) { /* out of memory: nothing can be promised any more */
            b->owed_total--;
            b->limit = tail_limit(b);
            return;
        }
        b->owed = grown;
        b->owed_cap = cap;
    }
    b->owed[b->owed_len].domain = domain;
    b->owed[b->owed_len++].count = 1;
}

/* Whether a pop in `domain` closes a push that was left out; then it is paid (and dropped). */
static int pay_owed_pop(thread_buffer* b, uint32_t domain)
{
    uint32_t i;
    for (i = 0; i < b->owed_len; ++i) {
        if (b->owed[i].domain == domain) {
            if (--b->owed[i].count == 0)
                b->owed[i] = b->owed[--b->owed_len];
            if (--b->owed_total == 0)
                b->limit = tail_limit(b);
            drop(b);
            return 1;
        }
    }
    return 0;
}

/* Before writing a push: 1 when it must be left out (the thread owes pops), counted. */
static inline int push_left_out(thread_buffer* b)
{
    if (b && UNLIKELY(b->owed_total != 0)) {
        drop(b);
        return 1;
    }
    return 0;
}

/* After a push was written or left out: the nesting level NVTX returns. */
static int pushed(thread_buffer* b, uint32_t domain, int written)
{
    if (!b)
        return 0;
    if (!written)
        owe_pop(b, domain);
    return b->depth++;
}

static inline int depth_pop(thread_buffer* b)
{
    if (!b)
        return -1;
    if (b->depth > 0)
        b->depth--;
    return b->depth;
}

/* A start left out: its id says so (bit 63; ids are index << 40 | seq), and its end is left out. */
#define START_LEFT_OUT (1ull << 63)

static inline uint64_t started(uint64_t id, int written)
{
    return written ? id : id | START_LEFT_OUT;
}

static void end_range(uint32_t domain, uint64_t id)
{
    if (!id)
        return;
    if (id & START_LEFT_OUT)
        drop(buffer());
    else
        write_simple(ANR_K_END, domain, id);
}

/*
 * The hot paths: a push whose message is a registered string (autonvtx's ranges, nvtx's
 * annotate with a domain) and a pop, when the thread's current chunk has room. They write the
 * same records as write_attributes/write_simple with whole-word stores and one commit; anything
 * else (first event of a thread, a full chunk, inline or wide messages, payloads) returns 0 and
 * takes the general path.
 */
static inline int push_fast(uint32_t domain, const nvtxEventAttributes_t* a, int* depth)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b || !a || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED || !a->message.registered
                 || (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64
                     && a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT)))
        return 0;
    chunk* c = b->tail;
    size_t used = b->tail_used;
    if (UNLIKELY(used + 32 > b->limit))
        return 0;
    uint32_t words[4];
    unsigned k = 0;
    uint64_t flags = 0;
    if (a->colorType == NVTX_COLOR_ARGB) {
        flags |= ANR_F_COLOR;
        words[k++] = a->color;
    }
    if (a->category != 0) {
        flags |= ANR_F_CATEGORY;
        words[k++] = a->category;
    }
    words[k++] = ((const string_entry*)(const void*)a->message.registered)->id;
    words[k] = 0;
    char* p = c->data + used;
    uint64_t head = (uint64_t)ANR_K_PUSH | (flags << 8) | ((uint64_t)ANR_M_REGISTERED << 24)
                  | ((uint64_t)domain << 32);
    uint64_t ts = now_ts();
    memcpy(p, &head, 8);
    memcpy(p + 8, &ts, 8);
    memcpy(p + 16, words, 8);
    size_t n = 24;
    if (k > 2) {
        memcpy(p + 24, words + 2, 8);
        n = 32;
    }
    used += n;
    b->tail_used = used;
    atomic_store_explicit(&c->used, used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
    *depth = b->depth++;
    return 1;
}

static inline int pop_fast(uint32_t domain, int* depth)
{
    thread_buffer* b = t_buffer;
    if (UNLIKELY(!b))
        return 0;
    chunk* c = b->tail;
    size_t used = b->tail_used;
    if (UNLIKELY(used + 16 > b->limit))
        return 0;
    char* p = c->data + used;
    uint64_t head = (uint64_t)ANR_K_POP | ((uint64_t)domain << 32);
    uint64_t ts = now_ts();
    memcpy(p, &head, 8);
    memcpy(p + 8, &ts, 8);
    used += 16;
    b->tail_used = used;
    atomic_store_explicit(&c->used, used, memory_order_release);
    atomic_store_explicit(&b->events,
        atomic_load_explicit(&b->events, memory_order_relaxed) + 1, memory_order_relaxed);
    if (b->depth > 0)
        b->depth--;
    *depth = b->depth;
    return 1;
}

static __attribute__((noinline)) int push_slow(uint32_t domain, const nvtxEventAttributes_t* a)
{
    thread_buffer* b = buffer();
    return pushed(b, domain, !push_left_out(b) && write_attributes(ANR_K_PUSH, domain, 0, a));
}

static __attribute__((noinline)) int pop_slow(uint32_t domain)
{
    thread_buffer* b = buffer();
    if (!b || !b->owed_total || !pay_owed_pop(b, domain))
        write_simple(ANR_K_POP, domain, 0);
    return depth_pop(b);
}

/* ---- recording callbacks: CORE ---- */

static void NVTX_API rec_MarkEx(const nvtxEventAttributes_t* a) { write_attributes(ANR_K_MARK, 0, 0, a); }
static void NVTX_API rec_MarkA(const char* m) { write_text(ANR_K_MARK, 0, 0, m ? m : "", m ? strlen(m) : 0); }
static void NVTX_API rec_MarkW(const wchar_t* m) { write_wide(ANR_K_MARK, 0, 0, m); }

static nvtxRangeId_t NVTX_API rec_RangeStartEx(const nvtxEventAttributes_t* a)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_attributes(ANR_K_START, 0, id, a)) : 0;
}
static nvtxRangeId_t NVTX_API rec_RangeStartA(const char* m)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_text(ANR_K_START, 0, id, m ? m : "", m ? strlen(m) : 0)) : 0;
}
static nvtxRangeId_t NVTX_API rec_RangeStartW(const wchar_t* m)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_wide(ANR_K_START, 0, id, m)) : 0;
}
static void NVTX_API rec_RangeEnd(nvtxRangeId_t id) { end_range(0, id); }

static int NVTX_API rec_RangePushEx(const nvtxEventAttributes_t* a)
{
    int depth;
    if (LIKELY(push_fast(0, a, &depth)))
        return depth;
    return push_slow(0, a);
}
static int NVTX_API rec_RangePushA(const char* m)
{
    thread_buffer* b = buffer();
    return pushed(b, 0, !push_left_out(b) && write_text(ANR_K_PUSH, 0, 0, m ? m : "", m ? strlen(m) : 0));
}
static int NVTX_API rec_RangePushW(const wchar_t* m)
{
    thread_buffer* b = buffer();
    return pushed(b, 0, !push_left_out(b) && write_wide(ANR_K_PUSH, 0, 0, m));
}
static int NVTX_API rec_RangePop(void)
{
    int depth;
    if (LIKELY(pop_fast(0, &depth)))
        return depth;
    return pop_slow(0);
}

/* ---- recording callbacks: CORE2 (domains) ---- */

static void NVTX_API rec_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { write_attributes(ANR_K_MARK, domain_id(d), 0, a); }
static nvtxRangeId_t NVTX_API rec_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
{
    uint64_t id = new_range_id();
    return id ? started(id, write_attributes(ANR_K_START, domain_id(d), id, a)) : 0;
}
static void NVTX_API rec_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { end_range(domain_id(d), id); }
static int NVTX_API rec_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
{
    int depth;
    if (LIKELY(push_fast(domain_id(d), a, &depth)))
        return depth;
    return push_slow(domain_id(d), a);
}
static int NVTX_API rec_DomainRangePop(nvtxDomainHandle_t d)
{
    int depth;
    if (LIKELY(pop_fast(domain_id(d), &depth)))
        return depth;
    return pop_slow(domain_id(d));
}

/* ---- no-op callbacks: a tool that is attached but does nothing ---- */

static void NVTX_API noop_MarkEx(const nvtxEventAttributes_t* a) { (void)a; }
static void NVTX_API noop_MarkA(const char* m) { (void)m; }
static void NVTX_API noop_MarkW(const wchar_t* m) { (void)m; }
static nvtxRangeId_t NVTX_API noop_RangeStartEx(const nvtxEventAttributes_t* a) { (void)a; return 0; }
static nvtxRangeId_t NVTX_API noop_RangeStartA(const char* m) { (void)m; return 0; }
static nvtxRangeId_t NVTX_API noop_RangeStartW(const wchar_t* m) { (void)m; return 0; }
static void NVTX_API noop_RangeEnd(nvtxRangeId_t id) { (void)id; }
static int NVTX_API noop_RangePushEx(const nvtxEventAttributes_t* a) { (void)a; return 0; }
static int NVTX_API noop_RangePushA(const char* m) { (void)m; return 0; }
static int NVTX_API noop_RangePushW(const wchar_t* m) { (void)m; return 0; }
static int NVTX_API noop_RangePop(void) { return 0; }
static void NVTX_API noop_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; }
static nvtxRangeId_t NVTX_API noop_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; return 0; }
static void NVTX_API noop_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; (void)id; }
static int NVTX_API noop_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { (void)d; (void)a; return 0; }
static int NVTX_API noop_DomainRangePop(nvtxDomainHandle_t d) { (void)d; return 0; }

const slot g_event_slots[] = {
    CORE(MarkEx, rec_MarkEx, noop_MarkEx),
    CORE(MarkA, rec_MarkA, noop_MarkA),
    CORE(MarkW, rec_MarkW, noop_MarkW),
    CORE(RangeStartEx, rec_RangeStartEx, noop_RangeStartEx),
    CORE(RangeStartA, rec_RangeStartA, noop_RangeStartA),
    CORE(RangeStartW, rec_RangeStartW, noop_RangeStartW),
    CORE(RangeEnd, rec_RangeEnd, noop_RangeEnd),
    CORE(RangePushEx, rec_RangePushEx, noop_RangePushEx),
    CORE(RangePushA, rec_RangePushA, noop_RangePushA),
    CORE(RangePushW, rec_RangePushW, noop_RangePushW),
    CORE(RangePop, rec_RangePop, noop_RangePop),
    CORE2(DomainMarkEx, rec_DomainMarkEx, noop_DomainMarkEx),
    CORE2(DomainRangeStartEx, rec_DomainRangeStartEx, noop_DomainRangeStartEx),
    CORE2(DomainRangeEnd, rec_DomainRangeEnd, noop_DomainRangeEnd),
    CORE2(DomainRangePushEx, rec_DomainRangePushEx, noop_DomainRangePushEx),
    CORE2(DomainRangePop, rec_DomainRangePop, noop_DomainRangePop),
};
const size_t g_event_slot_count = sizeof(g_event_slots) / sizeof(g_event_slots[0]);
