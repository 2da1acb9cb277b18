/* The exporter's Chrome trace-event JSON writer: one event per range or mark, names escaped once. */
#include "export.h"

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

void color_text(char out[8], uint32_t color)
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

void json_range(exporter* x, uint32_t tid, const opened* o, uint64_t end, int is_open)
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

void json_mark(exporter* x, uint32_t tid, const opened* o)
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
void json_async(exporter* x, uint32_t tid, uint32_t end_tid, const opened* o, uint64_t end, int is_open)
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
