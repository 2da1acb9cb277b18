/* The exporter's range statistics: rows keyed by (group, parent row, name) with every duration
   kept for exact medians, class folding, --skip-first, and the ctypes calls that read them. */
#include "export.h"

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

int64_t stats_row(stats* s, uint64_t group, int64_t parent, uint32_t name, uint32_t depth)
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
    r->sum += duration;
    r->self += self;
    r->open += is_open != 0;
    r->sumsq += (long double)duration * (long double)duration;
    if (duration < r->min)
        r->min = duration;
    if (duration > r->max)
        r->max = duration;
}

void stats_span(stats* s, uint64_t group, uint64_t first, uint64_t last)
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

/* One "DIMS DTYPE" of a shapes suffix from s[i] (DIMS: "scalar" or digits joined by 'x'; DTYPE: a
   letter or '_', then letters, digits, '_' or '.'): where it ends, or 0 when there is none. */
static size_t shape_item_end(const unsigned char* s, size_t n, size_t i)
{
    if (n - i >= 6 && memcmp(s + i, "scalar", 6) == 0) {
        i += 6;
    } else {
        for (;;) {
            size_t start = i;
            while (i < n && is_digit(s[i]))
                ++i;
            if (i == start)
                return 0;
            if (i < n && s[i] == 'x')
                ++i;
            else
                break;
        }
    }
    if (i >= n || s[i] != ' ')
        return 0;
    ++i;
    if (i >= n || (!((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') && s[i] != '_'))
        return 0;
    while (i < n && (is_digit(s[i]) || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') || s[i] == '_' || s[i] == '.'))
        ++i;
    return i;
}

/* Where the shapes suffix autonvtx.shapes writes (" [32x8 float32, scalar int64]") starts at the
   end of s, or n when s does not end with one: stats.name_template's _SHAPES, byte by byte. */
static size_t shapes_start(const unsigned char* s, size_t n)
{
    size_t open, i;
    if (n < 4 || s[n - 1] != ']')
        return n;
    for (open = n - 1; open > 0 && s[open] != '['; --open)
        ;
    if (s[open] != '[' || open == 0 || s[open - 1] != ' ')
        return n;
    for (i = open + 1;;) {
        i = shape_item_end(s, n - 1, i);
        if (i == 0)
            return n;
        if (i == n - 1)
            return open - 1;
        if (n - 1 - i < 2 || s[i] != ',' || s[i + 1] != ' ')
            return n;
        i += 2;
    }
}

static const char SHAPES_PLACEHOLDER[] = " [{shapes}]";

/* With STATS_NUMBERS, the name with each number written "{n}" and a shapes suffix written
   " [{shapes}]" (interned; remembered per id); else, or for a name without either, the name
   itself. */
uint32_t numbered_name(exporter* x, uint32_t id)
{
    stats* s = &x->st;
    const unsigned char* text;
    size_t len, i, end, cut, k = 0;
    uint32_t domain, result = id;
    char* out;
    if (!(x->stats_mode & STATS_NUMBERS))
        return id;
    if (id < s->numbered_cap && s->numbered[id] != NONE32)
        return s->numbered[id];
    if (!grow_map(&s->numbered, &s->numbered_cap, id))
        return id;
    text = (const unsigned char*)x->names.items[id].text;
    len = text ? x->names.items[id].len : 0;
    domain = x->names.items[id].domain;
    /* "{n}" for a one-digit number: at most 3 bytes a byte; and the shapes placeholder. */
    if (len && (out = malloc(3 * len + sizeof SHAPES_PLACEHOLDER))) {
        cut = shapes_start(text, len);
        for (i = 0; i < cut;) {
            end = number_end(text, cut, i);
            if (end > i) {
                memcpy(out + k, "{n}", 3);
                k += 3;
                i = end;
            } else {
                out[k++] = (char)text[i++];
            }
        }
        if (cut < len) {
            memcpy(out + k, SHAPES_PLACEHOLDER, sizeof SHAPES_PLACEHOLDER - 1);
            k += sizeof SHAPES_PLACEHOLDER - 1;
        }
        if (k != len || memcmp(out, text, len) != 0)
            result = intern(&x->names, domain, out, k); /* may move names.items: text is its own block */
        free(out);
    }
    s->numbered[id] = result;
    return result;
}

/* The name a statistics row is keyed by: numbers folded (numbered_name), then with STATS_CLASS
   "a.b.{n}.attn (MultiheadAttention)" folds into "MultiheadAttention" (as stats.class_name does);
   other names stay. */
uint32_t stat_name(exporter* x, uint32_t id)
{
    const name* n;
    const char *text, *open;
    id = numbered_name(x, id);
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

uint64_t stats_group(const exporter* x, const thread_state* t)
{
    return x->stats_mode & STATS_BY_THREAD ? thread_uuid(x->pid, t->tid) : x->group;
}

/* Whether an instance of row r, the range `name` (as recorded), is among the thread's first
   `skip_first` of that range under its parent row (its warm-up: by its name with numbers folded,
   `step {n}`'s first steps; a class row folds many ranges, each with its own warm-up by its
   recorded name). Asked once per instance when it begins, so warm-up goes by start order, as
   stats_python counts it. */
int is_warm_up(exporter* x, thread_state* t, int64_t r, uint32_t name)
{
    uint32_t warms, seen;
    uint64_t key;
    if (!x->skip_first || r < 0)
        return 0;
    warms = x->stats_mode & STATS_CLASS ? name : numbered_name(x, name);
    key = (uint64_t)(x->st.rows[r].parent + 1) << 32 | warms;
    seen = u64map_get(&t->instances, key);
    seen = seen == NONE32 ? 0 : seen;
    if (seen >= x->skip_first)
        return 0;
    u64map_put(&t->instances, key, seen + 1);
    x->st.rows[r].seen++;
    return 1;
}

/* Counts an instance of row r from start to end (not a warm-up one). Its duration adds to the
   row's total only when it is `outermost`: no counted instance of the same row encloses it on
   its thread, so a recursive range's time counts once (as cProfile's cumulative time and an
   Nsight Systems export's report count it). The instances counted span the time that % wall
   divides by, so left-out warm-up is not in it either. */
void count_instance(exporter* x, thread_state* t, int64_t r, uint64_t start, uint64_t end, uint64_t self,
                    int is_open, int outermost)
{
    uint64_t duration = end > start ? end - start : 0;
    if (r < 0)
        return;
    stats_add(&x->st.rows[r], duration, self, is_open);
    if (outermost)
        x->st.rows[r].total += duration;
    if (start < t->span_first)
        t->span_first = start;
    if (end > t->span_last)
        t->span_last = end;
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

void stats_free(stats* s)
{
    size_t i;
    for (i = 0; i < s->count; ++i)
        free(s->rows[i].durations);
    free(s->rows);
    free(s->slots);
    free(s->groups);
    free(s->numbered);
}

EXPORT size_t autonvtx_export_rows(void* handle) { return ((exporter*)handle)->st.count; }

/* out: group, parent row + 1 (0: none), depth, count, total (nested instances of the row once),
   self, min, max, open, name id, domain id, seen; fout: mean, median, variance (sample, n - 1:
   its root is nsys's StdDev). */
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
    fout[0] = r->count ? (double)r->sum / (double)r->count : 0.0;
    fout[1] = 0.0;
    if (r->count) {
        size_t m = r->count / 2;
        uint64_t hi = select_kth(r->durations, r->count, m);
        fout[1] = (double)hi;
        if (r->count % 2 == 0)
            fout[1] = ((double)select_kth(r->durations, m, m - 1) + (double)hi) / 2.0;
    }
    spread = n * r->sumsq - (long double)r->sum * (long double)r->sum;
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
