/* The native sweep's tables: hash tables, the texts read (by their bytes) and the names they
 * are, the keys (domain, name), the tree's nodes, and the threads with their groups. */
#include "sweep.h"

/* A table for about `expected` entries (kept at most half full), at least `least` slots. */
int map_init(Map *map, size_t expected, size_t least)
{
    size_t size = least;
    while (size < expected * 2 && size < PRESIZED_AT_MOST) {
        size *= 2;
    }
    map->slots = calloc(size, sizeof(Slot));
    map->mask = size - 1;
    map->count = 0;
    return map->slots ? 0 : -1;
}

void map_free(Map *map)
{
    free(map->slots);
    map->slots = NULL;
}

static int map_grow(Map *map)
{
    Map bigger;
    if (map_init(&bigger, 0, (map->mask + 1) * 2) < 0) {
        return -1;
    }
    for (size_t i = 0; i <= map->mask; i++) {
        Slot *slot = &map->slots[i];
        if (USED(slot)) {
            *map_find(&bigger, slot->a, slot->b, slot->c) = *slot;
        }
    }
    bigger.count = map->count;
    free(map->slots);
    *map = bigger;
    return 0;
}

/* Claims the empty slot `slot` found by map_find for (a, b, c) with `value`: 0, or -1 when out
 * of memory. */
int map_claim(Map *map, Slot *slot, int64_t a, int64_t b, int32_t c, int32_t value)
{
    slot->a = a;
    slot->b = b;
    slot->c = c;
    SET(slot, value);
    if (++map->count * 2 > map->mask + 1 && map_grow(map) < 0) {
        return -1;
    }
    return 0;
}

/* `old` (an array of items of `size` bytes) grown to `items` items; where it cannot be, `old`
 * itself, still valid, and `*failed` set (so that parallel arrays are grown in one go and the
 * failure said once). */
void *grown_array(void *old, size_t items, size_t size, int *failed)
{
    void *moved = realloc(old, items * size);
    if (moved == NULL) {
        *failed = 1;
        return old;
    }
    return moved;
}

/* ---- texts */

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        h = (h ^ mix(word)) * 0x100000001b3ULL;
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, n - i);
    return mix(h ^ tail);
}

/* The sid of a str object (interned in s->strings): -1 on error. `distinct`: the caller knows
 * no str interned so far can equal it (different bytes, all valid UTF-8), so that --each's
 * names, all different, are not looked up: the dictionary of sids is built only when a str that
 * may repeat one comes (a renamed name, text that was not UTF-8). */
static int32_t sid_of(Sweep *s, PyObject *text, int distinct)
{
    if (distinct && s->sid_of == NULL) {
        Py_ssize_t sid = PyList_GET_SIZE(s->strings);
        return PyList_Append(s->strings, text) < 0 ? -1 : (int32_t)sid;
    }
    if (s->sid_of == NULL) {
        s->sid_of = PyDict_New();
        if (s->sid_of == NULL) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(s->strings); i++) {
            PyObject *number = PyLong_FromSsize_t(i);
            int failed = number == NULL || PyDict_SetItem(s->sid_of, PyList_GET_ITEM(s->strings, i), number) < 0;
            Py_XDECREF(number);
            if (failed) {
                return -1;
            }
        }
    }
    PyObject *known = PyDict_GetItemWithError(s->sid_of, text);
    if (known != NULL) {
        return (int32_t)PyLong_AsLong(known);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t sid = PyList_GET_SIZE(s->strings);
    PyObject *number = PyLong_FromSsize_t(sid);
    if (number == NULL || PyDict_SetItem(s->sid_of, text, number) < 0 || PyList_Append(s->strings, text) < 0) {
        Py_XDECREF(number);
        return -1;
    }
    Py_DECREF(number);
    return (int32_t)sid;
}

/* The texts' table twice as large: 0, or -1 when out of memory. */
static int texts_grow(Texts *t)
{
    size_t size = (t->mask + 1) * 2;
    TextSlot *bigger = calloc(size, sizeof *bigger);
    if (bigger == NULL) {
        return -1;
    }
    for (size_t j = 0; j <= t->mask; j++) {
        if (t->slots[j].used) {
            size_t k = t->slots[j].hash & (size - 1);
            while (bigger[k].used) {
                k = (k + 1) & (size - 1);
            }
            bigger[k] = t->slots[j];
        }
    }
    free(t->slots);
    t->slots = bigger;
    t->mask = size - 1;
    return 0;
}

/* The per-raw-text arrays twice as long: 0, or -1 when out of memory. */
static int raws_grow(Sweep *s)
{
    size_t grown = s->raws_capacity ? s->raws_capacity * 2 : 1024;
    int failed = 0;
    s->raw_sid = grown_array(s->raw_sid, grown, sizeof *s->raw_sid, &failed);
    s->raw_renamed = grown_array(s->raw_renamed, grown, sizeof *s->raw_renamed, &failed);
    s->raw_at = grown_array(s->raw_at, grown, sizeof *s->raw_at, &failed);
    s->raw_length = grown_array(s->raw_length, grown, sizeof *s->raw_length, &failed);
    if (failed) {
        return -1;
    }
    s->raws_capacity = grown;
    return 0;
}

/* The raw id of a text by its bytes (a new one decoded and given its sid): -1 on error. */
int32_t raw_text(Sweep *s, const char *p, size_t n)
{
    Texts *t = &s->texts;
    uint64_t h = hash_bytes(p, n);
    size_t i = h & t->mask;
    for (;;) {
        TextSlot *slot = &t->slots[i];
        if (!slot->used) {
            break;
        }
        if (slot->hash == h && slot->length == n && memcmp(t->bytes + slot->offset, p, n) == 0) {
            return slot->raw;
        }
        i = (i + 1) & t->mask;
    }
    /* As export._connect's text factory: UTF-8, invalid bytes read as U+FFFD. */
    int valid = 1;
    PyObject *text = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        valid = 0;
        text = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "replace");
    }
    if (text == NULL) {
        return -1;
    }
    int32_t sid = sid_of(s, text, valid);
    Py_DECREF(text);
    if (sid < 0) {
        return -1;
    }
    if (s->raws == s->raws_capacity && raws_grow(s) < 0) {
        goto nomemory;
    }
    while (t->size + n > t->capacity) {
        size_t grown = t->capacity ? t->capacity * 2 : 4096;
        char *moved = realloc(t->bytes, grown);
        if (moved == NULL) {
            goto nomemory;
        }
        t->bytes = moved;
        t->capacity = grown;
    }
    int32_t raw = (int32_t)s->raws++;
    s->raw_sid[raw] = sid;
    s->raw_renamed[raw] = -2;
    s->raw_at[raw] = t->size;
    s->raw_length[raw] = n;
    memcpy(t->bytes + t->size, p, n);
    TextSlot *slot = &t->slots[i];
    slot->used = 1;
    slot->hash = h;
    slot->offset = t->size;
    slot->length = n;
    slot->raw = raw;
    t->size += n;
    if (++t->count * 2 > t->mask + 1 && texts_grow(t) < 0) {
        goto nomemory;
    }
    return raw;
nomemory:
    PyErr_NoMemory();
    return -1;
}

/* A range's name as the Python sweep holds it: its sid after `rename` (NONE for NULL); -2 on error. */
int32_t range_name(Sweep *s, int32_t raw)
{
    int32_t sid = s->raw_sid[raw];
    if (s->rename == Py_None || sid == s->empty_sid) {
        return sid;  /* no renaming, or an empty name (which the Python sweep does not rename) */
    }
    int32_t renamed = s->raw_renamed[raw];
    if (renamed == -2) {
        PyObject *result = PyObject_CallOneArg(s->rename, PyList_GET_ITEM(s->strings, sid));
        if (result == NULL) {
            return -2;
        }
        renamed = sid_of(s, result, 0);
        Py_DECREF(result);
        if (renamed < 0) {
            return -2;
        }
        s->raw_renamed[raw] = renamed;
    }
    return renamed;
}

/* ---- the tree */

int32_t add_node(Sweep *s, int32_t parent, int32_t key, int32_t group, int shadowed, int start_end)
{
    if (s->nodes == s->nodes_capacity) {
        size_t grown = s->nodes_capacity ? s->nodes_capacity * 2 : 1024;
        int failed = 0;
        s->parent = grown_array(s->parent, grown, sizeof *s->parent, &failed);
        s->key = grown_array(s->key, grown, sizeof *s->key, &failed);
        s->group = grown_array(s->group, grown, sizeof *s->group, &failed);
        s->shadowed = grown_array(s->shadowed, grown, sizeof *s->shadowed, &failed);
        s->start_end = grown_array(s->start_end, grown, sizeof *s->start_end, &failed);
        s->totals = grown_array(s->totals, grown, NTOTALS * sizeof *s->totals, &failed);
        if (failed) {
            PyErr_NoMemory();
            return -1;
        }
        s->nodes_capacity = grown;
    }
    int32_t node = (int32_t)s->nodes++;
    s->parent[node] = parent;
    s->key[node] = key;
    s->group[node] = group;
    s->shadowed[node] = (uint8_t)shadowed;
    s->start_end[node] = (uint8_t)start_end;
    memset(&s->totals[(size_t)node * NTOTALS], 0, NTOTALS * sizeof(int64_t));
    return node;
}

/* The key id of (domain, name): -1 on error. Keys are found through their name: a name's keys
 * (one per domain it is used in, most often one) are chained from `first_key[sid]`. */
int32_t key_of(Sweep *s, int64_t domain, int32_t sid)
{
    if (sid == NONE) {
        sid = s->empty_sid;  /* (domain, name or "") */
    }
    if ((size_t)sid >= s->first_keys) {
        size_t grown = s->first_keys ? s->first_keys : 1024;
        while (grown <= (size_t)sid) {
            grown *= 2;
        }
        int32_t *first = realloc(s->first_key, grown * sizeof *first);
        if (first == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(first + s->first_keys, 0xff, (grown - s->first_keys) * sizeof *first);
        s->first_key = first;
        s->first_keys = grown;
    }
    for (int32_t key = s->first_key[sid]; key >= 0; key = s->next_key[key]) {
        if (s->key_domain[key] == domain) {
            return key;
        }
    }
    if (s->nkeys == s->keys_capacity) {
        size_t grown = s->keys_capacity ? s->keys_capacity * 2 : 1024;
        int failed = 0;
        s->key_domain = grown_array(s->key_domain, grown, sizeof *s->key_domain, &failed);
        s->key_sid = grown_array(s->key_sid, grown, sizeof *s->key_sid, &failed);
        s->next_key = grown_array(s->next_key, grown, sizeof *s->next_key, &failed);
        s->counted = grown_array(s->counted, grown, sizeof *s->counted, &failed);
        s->owner = grown_array(s->owner, grown, sizeof *s->owner, &failed);
        s->owned = grown_array(s->owned, grown, sizeof *s->owned, &failed);
        if (failed) {
            PyErr_NoMemory();
            return -1;
        }
        s->keys_capacity = grown;
    }
    int32_t key = (int32_t)s->nkeys++;
    s->key_domain[key] = domain;
    s->key_sid[key] = sid;
    s->next_key[key] = s->first_key[sid];
    s->first_key[sid] = key;
    s->counted[key] = 0;
    s->owner[key] = -1;
    s->owned[key] = 0;
    return key;
}

int names_add(Sweep *s, int32_t thread, int32_t key, int delta)
{
    if (s->owner[key] == thread && (delta > 0 || s->owned[key] > 0)) {
        s->owned[key] += delta;
        return 0;
    }
    if (delta > 0 && s->owned[key] == 0) {
        s->owner[key] = thread;
        s->owned[key] = delta;
        return 0;
    }
    Slot *slot = map_find(&s->names, thread, key, 0);
    if (USED(slot)) {
        SET(slot, VALUE(slot) + delta);
        return 0;
    }
    if (map_claim(&s->names, slot, thread, key, 0, delta) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The thread of a globalTid, made (its group asked of Python) the first time: -1 on error. */
int32_t thread_of(Sweep *s, int64_t global_tid)
{
    Slot *slot = map_find(&s->thread_of, global_tid, 0, 0);
    if (USED(slot)) {
        return VALUE(slot);
    }
    PyObject *tid = PyLong_FromLongLong(global_tid);
    if (tid == NULL) {
        return -1;
    }
    PyObject *label = PyObject_CallOneArg(s->group_of, tid);
    Py_DECREF(tid);
    if (label == NULL) {
        return -1;
    }
    int32_t gid;
    PyObject *known = PyDict_GetItemWithError(s->gid_of, label);
    if (known != NULL) {
        gid = (int32_t)PyLong_AsLong(known);
    } else if (PyErr_Occurred()) {
        Py_DECREF(label);
        return -1;
    } else {
        gid = (int32_t)s->ngroups;
        PyObject *number = PyLong_FromLong(gid);
        if (number == NULL || PyDict_SetItem(s->gid_of, label, number) < 0 ||
            PyList_Append(s->groups, label) < 0) {
            Py_XDECREF(number);
            Py_DECREF(label);
            return -1;
        }
        Py_DECREF(number);
        if (s->ngroups == s->groups_capacity) {
            size_t grown = s->groups_capacity ? s->groups_capacity * 2 : 16;
            int32_t *r = realloc(s->group_root, grown * sizeof *r);
            if (r) s->group_root = r;
            int32_t *o = realloc(s->group_outside, grown * sizeof *o);
            if (o) s->group_outside = o;
            if (!r || !o) {
                Py_DECREF(label);
                PyErr_NoMemory();
                return -1;
            }
            s->groups_capacity = grown;
        }
        s->group_root[gid] = -1;
        s->group_outside[gid] = -1;
        s->ngroups++;
    }
    Py_DECREF(label);
    if (s->group_root[gid] < 0) {
        int32_t root = add_node(s, -1, -1, gid, 0, 0);
        if (root < 0) {
            return -1;
        }
        s->group_root[gid] = root;
    }
    GROW(s->threads, s->nthreads, s->threads_capacity, {
        PyErr_NoMemory();
        return -1;
    });
    int32_t index = (int32_t)s->nthreads++;
    Thread *thread = &s->threads[index];
    memset(thread, 0, sizeof *thread);
    thread->root = s->group_root[gid];
    thread->group = gid;
    if (map_claim(&s->thread_of, map_find(&s->thread_of, global_tid, 0, 0), global_tid, 0, 0, index) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return index;
}

