/* autonvtx.report.nsys._sweep: the report's sweep (autonvtx/report/nsys/sweep.py, `Sweep.run`) in C,
 * reading the Nsight Systems export itself.
 *
 * Python builds the two queries (export.NsysExport.ranges_query / launches_query: the schema
 * logic stays there); this module runs them on its own read-only connection and walks ranges
 * and launches together exactly as `Sweep.run` does, returning the fields of a `Tally`. It calls
 * back into Python only where that is rare: the group label of a thread seen for the first time,
 * and the renaming of a name seen for the first time.
 *
 * SQLite without a build dependency on sqlite3.h or libsqlite3: the process already has SQLite
 * loaded by Python's _sqlite3 module, so the few functions used here are looked up in it at run
 * time (dlopen of that module with RTLD_NOLOAD, then dlsym: a handle's lookup covers the
 * libraries it depends on). Where they cannot be found, `unavailable()` says why and the Python
 * sweep runs.
 *
 * Whatever the Python sweep would read differently (a NULL time or thread, a kind of value the
 * queries do not give for an export nsys wrote, a sum past 64 bits) makes `run` return None: the
 * caller then runs the Python sweep, so the two never disagree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- SQLite's C interface: the prototypes and constants used here, declared by us from the
 * documented, stable ABI (https://sqlite.org/c3ref/funclist.html, /c3ref/c_abort.html for the
 * result codes, /c3ref/c_blob.html for the datatypes, /c3ref/c_open_autoproxy.html for the
 * open flags). */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_FLOAT 2
#define SQLITE_TEXT 3
#define SQLITE_BLOB 4
#define SQLITE_NULL 5
#define SQLITE_OPEN_READWRITE 0x00000002
#define SQLITE_OPEN_CREATE 0x00000004
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000

static struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close)(sqlite3 *);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*step)(sqlite3_stmt *);
    int (*column_type)(sqlite3_stmt *, int);
    long long (*column_int64)(sqlite3_stmt *, int);
    const unsigned char *(*column_text)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    int (*finalize)(sqlite3_stmt *);
    const char *(*errmsg)(sqlite3 *);
    int resolved;          /* 1: all found; -1: not (see `missing`) */
    char missing[256];
} sq;

/* Finds SQLite's functions where Python's _sqlite3 module has them: 0, or -1 with sq.missing. */
static int resolve_sqlite(void) {
    if (sq.resolved) {
        return sq.resolved > 0 ? 0 : -1;
    }
    sq.resolved = -1;
    PyObject *module = PyImport_ImportModule("_sqlite3");
    if (module == NULL) {
        PyErr_Clear();
        snprintf(sq.missing, sizeof sq.missing, "Python's _sqlite3 module does not import");
        return -1;
    }
    PyObject *file = PyObject_GetAttrString(module, "__file__");
    Py_DECREF(module);
    void *handle = NULL;
    if (file == NULL) {
        PyErr_Clear();  /* built into the interpreter: its symbols are the program's */
        handle = dlopen(NULL, RTLD_NOW);
    } else {
        const char *path = PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : NULL;
        if (path == NULL) {
            PyErr_Clear();
        } else {
            handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        }
        Py_DECREF(file);
    }
    if (handle == NULL) {
        snprintf(sq.missing, sizeof sq.missing, "Python's _sqlite3 module is not a loaded shared object");
        return -1;
    }
    struct {
        const char *name;
        void **slot;
    } wanted[] = {
        {"sqlite3_open_v2", (void **)&sq.open_v2},
        {"sqlite3_close", (void **)&sq.close},
        {"sqlite3_prepare_v2", (void **)&sq.prepare_v2},
        {"sqlite3_bind_int64", (void **)&sq.bind_int64},
        {"sqlite3_step", (void **)&sq.step},
        {"sqlite3_column_type", (void **)&sq.column_type},
        {"sqlite3_column_int64", (void **)&sq.column_int64},
        {"sqlite3_column_text", (void **)&sq.column_text},
        {"sqlite3_column_bytes", (void **)&sq.column_bytes},
        {"sqlite3_finalize", (void **)&sq.finalize},
        {"sqlite3_errmsg", (void **)&sq.errmsg},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        *wanted[i].slot = dlsym(handle, wanted[i].name);
        if (*wanted[i].slot == NULL) {
            snprintf(sq.missing, sizeof sq.missing,
                     "%s is not visible through Python's _sqlite3 module (SQLite linked into it statically?)",
                     wanted[i].name);
            return -1;
        }
    }
    /* The handle stays open: _sqlite3 is never unloaded, and the pointers must stay valid. */
    sq.resolved = 1;
    return 0;
}

/* ---- A hash map from (int64, int64, int32) to an int32 (open addressing, linear probing): 24
 * bytes a slot, so that the tables of a large export stay small. `stored` is the value + 1 (0:
 * an empty slot, so that calloc's zeroed memory is an empty table). */
typedef struct {
    int64_t a, b;
    int32_t c, stored;
} Slot;

#define USED(slot) ((slot)->stored != 0)
#define VALUE(slot) ((slot)->stored - 1)
#define SET(slot, value) ((slot)->stored = (int32_t)(value) + 1)

typedef struct {
    Slot *slots;
    size_t mask, count;
} Map;

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t hash3(int64_t a, int64_t b, int32_t c) {
    return mix((uint64_t)a * 0x9e3779b97f4a7c15ULL + mix((uint64_t)b ^ ((uint64_t)(uint32_t)c << 17)));
}

/* Tables are sized from the export's number of NVTX events up to this many slots (6 to 8 MB);
 * past it they grow as they fill (the hint overstates what a grouped report or a thread set
 * needs, and every slot of a large table ends up touched). */
#define PRESIZED_AT_MOST ((size_t)1 << 18)

/* A table for about `expected` entries (kept at most half full), at least `least` slots. */
static int map_init(Map *map, size_t expected, size_t least) {
    size_t size = least;
    while (size < expected * 2 && size < PRESIZED_AT_MOST) {
        size *= 2;
    }
    map->slots = calloc(size, sizeof(Slot));
    map->mask = size - 1;
    map->count = 0;
    return map->slots ? 0 : -1;
}

static void map_free(Map *map) {
    free(map->slots);
    map->slots = NULL;
}

/* The slot holding (a, b, c), or the empty slot where it would go. */
static inline Slot *map_find(Map *map, int64_t a, int64_t b, int32_t c) {
    size_t i = hash3(a, b, c) & map->mask;
    for (;;) {
        Slot *slot = &map->slots[i];
        if (!USED(slot) || (slot->a == a && slot->b == b && slot->c == c)) {
            return slot;
        }
        i = (i + 1) & map->mask;
    }
}

static int map_grow(Map *map) {
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
static int map_claim(Map *map, Slot *slot, int64_t a, int64_t b, int32_t c, int32_t value) {
    slot->a = a;
    slot->b = b;
    slot->c = c;
    SET(slot, value);
    if (++map->count * 2 > map->mask + 1 && map_grow(map) < 0) {
        return -1;
    }
    return 0;
}

/* ---- Texts read from the export, by their bytes: each raw text gets an id; texts that decode
 * to the same str (invalid UTF-8 decodes with U+FFFD, as export._connect's text factory does)
 * share the same `sid`, the index of the str in `Sweep.strings`. */
typedef struct {
    uint64_t hash;
    size_t offset, length;
    int32_t raw;
    uint8_t used;
} TextSlot;

typedef struct {
    TextSlot *slots;
    size_t mask, count;
    char *bytes;
    size_t size, capacity;
} Texts;

/* ---- The sweep's state: what `sweep.Sweep` and `sweep.Tally` hold. */
enum { INSTANCES, CPU_NS, SPAN_NS, WORK, NWORK = 8, NTOTALS = WORK + NWORK };
enum { NONE = -1 };  /* a NULL name */

typedef struct {
    int64_t end, start;
    int32_t node;
    int32_t has_work;
    int64_t gmin, gmax;
    int64_t work[NWORK];
} Instance;

typedef struct {
    Instance *items;
    size_t count, capacity;
} Stack;

typedef struct {
    int32_t root, group;
    Stack stack;   /* open push/pop range instances, outermost first */
    Stack active;  /* open start/end ranges (need not nest) */
} Thread;

typedef struct {
    int64_t count, ns;
    int32_t node, tag;  /* tag 0: kernel is the integer `value`; 1: the str sid `value`; 2: None */
    int64_t value;
} KernelEntry;

typedef struct {
    int32_t node;
    int64_t work[NWORK];
} Repeat;

typedef struct {
    int32_t group;
    int64_t work[NWORK];
} Outside;

#define GROW(array, count, capacity, failed)                                                \
    do {                                                                                    \
        if ((count) == (capacity)) {                                                        \
            size_t grown_ = (capacity) ? (capacity) * 2 : 16;                               \
            void *moved_ = realloc((array), grown_ * sizeof *(array));                      \
            if (moved_ == NULL) {                                                           \
                failed;                                                                     \
            }                                                                               \
            (array) = moved_;                                                               \
            (capacity) = grown_;                                                            \
        }                                                                                   \
    } while (0)

typedef struct {
    PyObject *group_of, *rename;
    int only_with_work;
    int overflow;   /* a sum past 64 bits: the Python sweep's integers have no such limit */
    int unsupported; /* a value the Python sweep reads differently: let it run */

    /* strings: sid -> str; sid_of: str -> sid (a Python dict, NULL until needed: see sid_of);
     * per raw text: its sid, and its renamed sid (-2: not asked yet) */
    PyObject *strings, *sid_of;
    int32_t empty_sid;
    Texts texts;
    int32_t *raw_sid, *raw_renamed;
    size_t raws, raws_capacity;

    /* groups: gid -> label; gid_of: label -> gid; root node and outside entry per gid */
    PyObject *groups, *gid_of;
    int32_t *group_root, *group_outside;
    size_t ngroups, groups_capacity;

    Thread *threads;
    size_t nthreads, threads_capacity;
    Map thread_of;  /* (globalTid) -> thread index */

    /* the tree: per node */
    int32_t *parent, *key, *group;
    uint8_t *shadowed, *start_end;
    int64_t *totals;  /* NTOTALS per node */
    size_t nodes, nodes_capacity;
    Map node_of;      /* (parent, domain or -1 - domain for start/end, name sid) -> node */

    /* keys: (domain, name sid) */
    int64_t *key_domain;
    int32_t *key_sid;
    uint64_t *counted;  /* per key: the launch that last credited it (`counted` of the Python) */
    size_t nkeys, keys_capacity;
    int32_t *next_key;  /* per key: the next key of the same name */
    int32_t *first_key; /* per sid: its first key (-1: none) */
    size_t first_keys;
    int32_t *owner;     /* per key: the thread whose count `owned` is (see names_get) */
    int64_t *owned;
    Map names;          /* (thread, key) -> instances of the key on the thread's stack, beyond `owned` */
    uint64_t launch_number;

    KernelEntry *kernels;
    size_t nkernels, kernels_capacity;
    Map kernel_of;    /* (node, tag, value) -> kernels entry */

    Repeat *repeats;
    size_t nrepeats, repeats_capacity;
    Map repeat_of;    /* (node) -> repeats entry */

    Outside *outside;
    size_t noutside, outside_capacity;

    int64_t launched[NWORK];
    int64_t misnested;

    Map renumbered;   /* (globalPid, domainId) -> index of its domain key (labels.Labels.renumbered) */
    int64_t *renumbered_keys;
} Sweep;

/* Where a kind's (kernel, memcpy, memset) count, bytes (or -1) and ns live in the work. */
static const int SLOTS[3][3] = {{0, -1, 1}, {2, 3, 4}, {5, 6, 7}};

static inline void add(Sweep *s, int64_t *into, int64_t value) {
    if (__builtin_add_overflow(*into, value, into)) {
        s->overflow = 1;
    }
}

static inline int64_t difference(Sweep *s, int64_t a, int64_t b) {
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d)) {
        s->overflow = 1;
        return 0;
    }
    return d;
}

/* ---- texts */

static uint64_t hash_bytes(const char *p, size_t n) {
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
static int32_t sid_of(Sweep *s, PyObject *text, int distinct) {
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

/* The raw id of a text by its bytes (a new one decoded and given its sid): -1 on error. */
static int32_t raw_text(Sweep *s, const char *p, size_t n) {
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
    if (s->raws == s->raws_capacity) {
        size_t grown = s->raws_capacity ? s->raws_capacity * 2 : 1024;
        int32_t *sids = realloc(s->raw_sid, grown * sizeof *sids);
        if (sids != NULL) {
            s->raw_sid = sids;
        }
        int32_t *renamed = realloc(s->raw_renamed, grown * sizeof *renamed);
        if (renamed != NULL) {
            s->raw_renamed = renamed;
        }
        if (sids == NULL || renamed == NULL) {
            goto nomemory;
        }
        s->raws_capacity = grown;
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
    memcpy(t->bytes + t->size, p, n);
    TextSlot *slot = &t->slots[i];
    slot->used = 1;
    slot->hash = h;
    slot->offset = t->size;
    slot->length = n;
    slot->raw = raw;
    t->size += n;
    if (++t->count * 2 > t->mask + 1) {
        size_t size = (t->mask + 1) * 2;
        TextSlot *bigger = calloc(size, sizeof *bigger);
        if (bigger == NULL) {
            goto nomemory;
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
    }
    return raw;
nomemory:
    PyErr_NoMemory();
    return -1;
}

/* A range's name as the Python sweep holds it: its sid after `rename` (NONE for NULL); -2 on error. */
static int32_t range_name(Sweep *s, int32_t raw) {
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

static int32_t add_node(Sweep *s, int32_t parent, int32_t key, int32_t group, int shadowed, int start_end) {
    if (s->nodes == s->nodes_capacity) {
        size_t grown = s->nodes_capacity ? s->nodes_capacity * 2 : 1024;
        int32_t *p = realloc(s->parent, grown * sizeof *p);
        if (p) s->parent = p;
        int32_t *k = realloc(s->key, grown * sizeof *k);
        if (k) s->key = k;
        int32_t *g = realloc(s->group, grown * sizeof *g);
        if (g) s->group = g;
        uint8_t *sh = realloc(s->shadowed, grown);
        if (sh) s->shadowed = sh;
        uint8_t *se = realloc(s->start_end, grown);
        if (se) s->start_end = se;
        int64_t *t = realloc(s->totals, grown * NTOTALS * sizeof *t);
        if (t) s->totals = t;
        if (!p || !k || !g || !sh || !se || !t) {
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
static int32_t key_of(Sweep *s, int64_t domain, int32_t sid) {
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
        int64_t *d = realloc(s->key_domain, grown * sizeof *d);
        if (d) s->key_domain = d;
        int32_t *n = realloc(s->key_sid, grown * sizeof *n);
        if (n) s->key_sid = n;
        int32_t *x = realloc(s->next_key, grown * sizeof *x);
        if (x) s->next_key = x;
        uint64_t *c = realloc(s->counted, grown * sizeof *c);
        if (c) s->counted = c;
        int32_t *o = realloc(s->owner, grown * sizeof *o);
        if (o) s->owner = o;
        int64_t *k = realloc(s->owned, grown * sizeof *k);
        if (k) s->owned = k;
        if (!d || !n || !x || !c || !o || !k) {
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

/* How many instances of `key` a thread's stack holds (`Sweep._Thread.names`). Nearly always one
 * thread at a time holds a key: its count lives with the key (`owner`, `owned`); another thread
 * holding the key meanwhile counts in the `names` table. A thread's count is the sum of both. */
static inline int64_t names_get(Sweep *s, int32_t thread, int32_t key) {
    int64_t count = s->owner[key] == thread ? s->owned[key] : 0;
    if (s->names.count) {
        Slot *slot = map_find(&s->names, thread, key, 0);
        if (USED(slot)) {
            count += VALUE(slot);
        }
    }
    return count;
}

static int names_add(Sweep *s, int32_t thread, int32_t key, int delta) {
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
static int32_t thread_of(Sweep *s, int64_t global_tid) {
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

/* ---- the sweep (each function is its namesake in sweep.py) */

static void finish(Sweep *s, const Instance *instance, Instance *parent) {
    if (!instance->has_work && s->only_with_work) {
        return;
    }
    int64_t *totals = &s->totals[(size_t)instance->node * NTOTALS];
    add(s, &totals[INSTANCES], 1);
    add(s, &totals[CPU_NS], difference(s, instance->end, instance->start));
    if (!instance->has_work) {
        return;
    }
    add(s, &totals[SPAN_NS], difference(s, instance->gmax, instance->gmin));
    for (int i = 0; i < NWORK; i++) {
        add(s, &totals[WORK + i], instance->work[i]);
    }
    if (parent == NULL) {
        return;
    }
    if (instance->end > parent->end) {
        s->misnested++;
    }
    if (!parent->has_work) {
        parent->has_work = 1;
        parent->gmin = instance->gmin;
        parent->gmax = instance->gmax;
        memcpy(parent->work, instance->work, sizeof parent->work);
        return;
    }
    for (int i = 0; i < NWORK; i++) {
        add(s, &parent->work[i], instance->work[i]);
    }
    if (instance->gmin < parent->gmin) {
        parent->gmin = instance->gmin;
    }
    if (instance->gmax > parent->gmax) {
        parent->gmax = instance->gmax;
    }
}

static int pop(Sweep *s, int32_t index) {
    Thread *thread = &s->threads[index];
    Instance instance = thread->stack.items[--thread->stack.count];
    if (names_add(s, index, s->key[instance.node], -1) < 0) {
        return -1;
    }
    finish(s, &instance, thread->stack.count ? &thread->stack.items[thread->stack.count - 1] : NULL);
    return 0;
}

typedef struct {
    int64_t global_tid, at, kind, gpu_start, gpu_end, size;
    int32_t kernel_tag;
    int64_t kernel;
} Launch;

static inline void add_work(Sweep *s, int64_t *into, int kind, int64_t duration, int64_t size) {
    add(s, &into[SLOTS[kind][0]], 1);
    add(s, &into[SLOTS[kind][2]], duration);
    if (SLOTS[kind][1] >= 0) {
        add(s, &into[SLOTS[kind][1]], size);
    }
}

static int outside(Sweep *s, Thread *thread, const Launch *w, int64_t duration) {
    int32_t at = s->group_outside[thread->group];
    if (at < 0) {
        GROW(s->outside, s->noutside, s->outside_capacity, {
            PyErr_NoMemory();
            return -1;
        });
        at = s->group_outside[thread->group] = (int32_t)s->noutside++;
        s->outside[at].group = thread->group;
        memset(s->outside[at].work, 0, sizeof s->outside[at].work);
    }
    add_work(s, s->outside[at].work, (int)w->kind, duration, w->size);
    return 0;
}

static int credit(Sweep *s, Instance *instance, const Launch *w, int64_t duration, int top_kernel) {
    if (!instance->has_work) {
        instance->has_work = 1;
        instance->gmin = w->gpu_start;
        instance->gmax = w->gpu_end;
        memset(instance->work, 0, sizeof instance->work);
    } else {
        if (w->gpu_start < instance->gmin) {
            instance->gmin = w->gpu_start;
        }
        if (w->gpu_end > instance->gmax) {
            instance->gmax = w->gpu_end;
        }
    }
    add_work(s, instance->work, (int)w->kind, duration, w->size);
    if (w->kind == 0 && top_kernel) {
        Slot *slot = map_find(&s->kernel_of, w->kernel, w->kernel_tag, instance->node);
        if (USED(slot)) {
            KernelEntry *seen = &s->kernels[VALUE(slot)];
            add(s, &seen->count, 1);
            add(s, &seen->ns, duration);
            return 0;
        }
        GROW(s->kernels, s->nkernels, s->kernels_capacity, {
            PyErr_NoMemory();
            return -1;
        });
        KernelEntry *entry = &s->kernels[s->nkernels];
        entry->count = 1;
        entry->ns = duration;
        entry->node = instance->node;
        entry->tag = w->kernel_tag;
        entry->value = w->kernel;
        if (map_claim(&s->kernel_of, slot, w->kernel, w->kernel_tag, instance->node, (int32_t)s->nkernels++) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static int launch_among_start_end(Sweep *s, int32_t index, const Launch *w, int64_t duration) {
    Thread *thread = &s->threads[index];
    Stack *stack = &thread->stack, *active = &thread->active;
    if (stack->count && credit(s, &stack->items[stack->count - 1], w, duration, 1) < 0) {
        return -1;
    }
    int credited = stack->count > 0;
    uint64_t number = ++s->launch_number;
    size_t kept = 0;
    for (size_t i = 0; i < active->count; i++) {
        if (active->items[i].end < w->at) {
            finish(s, &active->items[i], NULL);
            continue;
        }
        active->items[kept] = active->items[i];
        Instance *instance = &active->items[kept++];
        int32_t key = s->key[instance->node];
        int repeat = names_get(s, index, key) > 0 || s->counted[key] == number;
        s->counted[key] = number;
        credited = 1;
        if (credit(s, instance, w, duration, !repeat) < 0) {
            return -1;
        }
        if (repeat) {
            Slot *slot = map_find(&s->repeat_of, instance->node, 0, 0);
            if (!USED(slot)) {
                GROW(s->repeats, s->nrepeats, s->repeats_capacity, {
                    PyErr_NoMemory();
                    return -1;
                });
                memset(&s->repeats[s->nrepeats], 0, sizeof s->repeats[0]);
                s->repeats[s->nrepeats].node = instance->node;
                if (map_claim(&s->repeat_of, slot, instance->node, 0, 0, (int32_t)s->nrepeats++) < 0) {
                    PyErr_NoMemory();
                    return -1;
                }
                slot = map_find(&s->repeat_of, instance->node, 0, 0);
            }
            add_work(s, s->repeats[VALUE(slot)].work, (int)w->kind, duration, w->size);
        }
    }
    active->count = kept;
    if (!credited) {
        return outside(s, thread, w, duration);
    }
    return 0;
}

static int launch(Sweep *s, const Launch *w) {
    int32_t index = thread_of(s, w->global_tid);
    if (index < 0) {
        return -1;
    }
    Thread *thread = &s->threads[index];
    while (thread->stack.count && thread->stack.items[thread->stack.count - 1].end < w->at) {
        if (pop(s, index) < 0) {
            return -1;
        }
    }
    int64_t duration = difference(s, w->gpu_end, w->gpu_start);
    add_work(s, s->launched, (int)w->kind, duration, w->size);
    if (thread->active.count) {
        return launch_among_start_end(s, index, w, duration);
    }
    if (thread->stack.count) {
        return credit(s, &thread->stack.items[thread->stack.count - 1], w, duration, 1);
    }
    return outside(s, thread, w, duration);
}

static int push(Stack *stack, int64_t end, int64_t start, int32_t node) {
    GROW(stack->items, stack->count, stack->capacity, {
        PyErr_NoMemory();
        return -1;
    });
    Instance *instance = &stack->items[stack->count++];
    instance->end = end;
    instance->start = start;
    instance->node = node;
    instance->has_work = 0;
    return 0;
}

/* ---- reading rows */

/* Outcome of reading a row: 1 a row, 0 no more, -1 a Python error, -2 an SQLite error (message
 * in the connection), -3 a value the Python sweep must read (s->unsupported set). */
enum { ROW = 1, END = 0, PYERROR = -1, SQLERROR = -2, UNSUPPORTED = -3 };

static inline int integer(sqlite3_stmt *stmt, int column, int64_t *into) {
    if (sq.column_type(stmt, column) != SQLITE_INTEGER) {
        return -1;
    }
    *into = sq.column_int64(stmt, column);
    return 0;
}

/* The text column's sid (NONE for NULL), or NOT_TEXT for another type, TEXT_ERROR for a Python
 * error. */
enum { NOT_TEXT = -2, TEXT_ERROR = -3 };

static int32_t text_column(Sweep *s, sqlite3_stmt *stmt, int column, int32_t *raw) {
    int type = sq.column_type(stmt, column);
    if (type == SQLITE_NULL) {
        *raw = NONE;
        return NONE;
    }
    if (type != SQLITE_TEXT) {
        return NOT_TEXT;
    }
    const unsigned char *text = sq.column_text(stmt, column);
    int length = sq.column_bytes(stmt, column);
    if (text == NULL && length == 0) {
        text = (const unsigned char *)"";
    } else if (text == NULL) {
        PyErr_NoMemory();
        return TEXT_ERROR;
    }
    *raw = raw_text(s, (const char *)text, (size_t)length);
    return *raw < 0 ? TEXT_ERROR : s->raw_sid[*raw];
}

static int next_launch(Sweep *s, sqlite3_stmt *stmt, Launch *w) {
    if (stmt == NULL) {
        return END;
    }
    int rc = sq.step(stmt);
    if (rc == SQLITE_DONE) {
        return END;
    }
    if (rc != SQLITE_ROW) {
        return SQLERROR;
    }
    int64_t size = 0;
    int size_type = sq.column_type(stmt, 7);
    if (integer(stmt, 0, &w->global_tid) || integer(stmt, 1, &w->at) || integer(stmt, 2, &w->kind) ||
        integer(stmt, 3, &w->gpu_start) || integer(stmt, 4, &w->gpu_end) || w->kind < 0 || w->kind > 2 ||
        (size_type != SQLITE_NULL && integer(stmt, 7, &size))) {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    w->size = size;  /* `size or 0` */
    int kernel_type = sq.column_type(stmt, 6);
    if (kernel_type == SQLITE_INTEGER) {
        w->kernel_tag = 0;
        w->kernel = sq.column_int64(stmt, 6);
    } else if (kernel_type == SQLITE_NULL) {
        w->kernel_tag = 2;
        w->kernel = 0;
    } else if (kernel_type == SQLITE_TEXT) {
        int32_t raw;
        int32_t sid = text_column(s, stmt, 6, &raw);
        if (sid == TEXT_ERROR) {
            return PYERROR;
        }
        w->kernel_tag = 1;
        w->kernel = sid;
    } else {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    return ROW;
}

/* The statement of (sql, args): NULL with the connection's message on failure (or
 * s->unsupported for an argument that is not an integer). */
static sqlite3_stmt *prepare(Sweep *s, sqlite3 *db, PyObject *query, int *failed) {
    *failed = 0;
    if (query == Py_None) {
        return NULL;
    }
    PyObject *sql_object, *args;
    if (!PyArg_ParseTuple(query, "UO!", &sql_object, &PyTuple_Type, &args)) {
        *failed = PYERROR;
        return NULL;
    }
    Py_ssize_t length;
    const char *sql = PyUnicode_AsUTF8AndSize(sql_object, &length);
    if (sql == NULL) {
        *failed = PYERROR;
        return NULL;
    }
    sqlite3_stmt *stmt = NULL;
    if (sq.prepare_v2(db, sql, (int)length + 1, &stmt, NULL) != SQLITE_OK) {
        *failed = SQLERROR;
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *arg = PyTuple_GET_ITEM(args, i);
        int overflow = 0;
        long long value = PyLong_CheckExact(arg) ? PyLong_AsLongLongAndOverflow(arg, &overflow) : 0;
        if (!PyLong_CheckExact(arg) || overflow || (value == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            sq.finalize(stmt);
            s->unsupported = 1;
            *failed = UNSUPPORTED;
            return NULL;
        }
        if (sq.bind_int64(stmt, (int)i + 1, value) != SQLITE_OK) {
            sq.finalize(stmt);
            *failed = SQLERROR;
            return NULL;
        }
    }
    return stmt;
}

/* The whole walk: ROW when done (the state holds the tally), else an outcome above. `first`:
 * what the ranges' first step gave (taken before the launches' query is prepared, in the order
 * the Python sweep's cursors run). */
static int sweep(Sweep *s, sqlite3_stmt *ranges, int first, sqlite3_stmt *launches) {
    Launch w;
    int have = next_launch(s, launches, &w);
    if (have < 0) {
        return have;
    }
    for (int rc = first; ranges != NULL; rc = sq.step(ranges)) {
        if (rc == SQLITE_DONE) {
            break;
        }
        if (rc != SQLITE_ROW) {
            return SQLERROR;
        }
        int64_t global_tid, start, end, start_end, domain;
        if (integer(ranges, 0, &global_tid) || integer(ranges, 1, &start) || integer(ranges, 2, &end) ||
            integer(ranges, 3, &start_end) || integer(ranges, 4, &domain)) {
            s->unsupported = 1;
            return UNSUPPORTED;
        }
        int32_t raw;
        int32_t sid = text_column(s, ranges, 5, &raw);
        if (sid == TEXT_ERROR) {
            return PYERROR;
        }
        if (sid == NOT_TEXT) {
            s->unsupported = 1;
            return UNSUPPORTED;
        }
        if (s->renumbered.count) {
            Slot *slot = map_find(&s->renumbered, global_tid & ~(int64_t)0xFFFFFF, domain, 0);
            if (USED(slot)) {
                domain = s->renumbered_keys[VALUE(slot)];
            }
        }
        /* A range that starts when a call starts encloses it: launches strictly before go first. */
        while (have == ROW && w.at < start) {
            if (launch(s, &w) < 0) {
                return PYERROR;
            }
            have = next_launch(s, launches, &w);
            if (have < 0) {
                return have;
            }
        }
        int32_t index = thread_of(s, global_tid);
        if (index < 0) {
            return PYERROR;
        }
        if (sid != NONE) {
            sid = range_name(s, raw);
            if (sid == -2) {
                return PYERROR;
            }
        }
        Thread *thread = &s->threads[index];
        if (start_end) {
            /* Start/end ranges need not nest with anything: each is a root of its own, apart
             * from push/pop ranges of the same name. */
            int32_t key = key_of(s, domain, sid);
            if (key < 0) {
                return PYERROR;
            }
            int64_t apart;
            if (__builtin_sub_overflow((int64_t)-1, domain, &apart)) {
                s->overflow = 1;
            }
            Slot *slot = map_find(&s->node_of, apart, sid, thread->root);
            int32_t node;
            if (USED(slot)) {
                node = VALUE(slot);
            } else {
                node = add_node(s, thread->root, key, thread->group, 0, 1);
                if (node < 0) {
                    return PYERROR;
                }
                if (map_claim(&s->node_of, slot, apart, sid, thread->root, node) < 0) {
                    PyErr_NoMemory();
                    return PYERROR;
                }
            }
            if (push(&thread->active, end, start, node) < 0) {
                return PYERROR;
            }
            continue;
        }
        while (thread->stack.count && thread->stack.items[thread->stack.count - 1].end < start) {
            if (pop(s, index) < 0) {
                return PYERROR;
            }
        }
        int32_t parent = thread->stack.count ? thread->stack.items[thread->stack.count - 1].node : thread->root;
        Slot *slot = map_find(&s->node_of, domain, sid, parent);
        int32_t node, key;
        if (USED(slot)) {
            node = VALUE(slot);
            key = s->key[node];
        } else {
            key = key_of(s, domain, sid);
            if (key < 0) {
                return PYERROR;
            }
            /* Shadowed: an instance of the same name encloses this position (recursion). */
            node = add_node(s, parent, key, thread->group, names_get(s, index, key) > 0, 0);
            if (node < 0) {
                return PYERROR;
            }
            if (map_claim(&s->node_of, slot, domain, sid, parent, node) < 0) {
                PyErr_NoMemory();
                return PYERROR;
            }
        }
        if (names_add(s, index, key, 1) < 0) {
            return PYERROR;
        }
        if (push(&thread->stack, end, start, node) < 0) {
            return PYERROR;
        }
    }
    while (have == ROW) {
        if (launch(s, &w) < 0) {
            return PYERROR;
        }
        have = next_launch(s, launches, &w);
        if (have < 0) {
            return have;
        }
    }
    for (size_t i = 0; i < s->nthreads; i++) {
        while (s->threads[i].stack.count) {
            if (pop(s, (int32_t)i) < 0) {
                return PYERROR;
            }
        }
        Thread *thread = &s->threads[i];
        for (size_t j = 0; j < thread->active.count; j++) {
            finish(s, &thread->active.items[j], NULL);
        }
        thread->active.count = 0;
    }
    return ROW;
}

/* ---- the Tally's fields as Python objects */

static PyObject *work_list(const int64_t *work, int n) {
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *number = PyLong_FromLongLong(work[i]);
        if (number == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, number);
    }
    return list;
}

#define SET_OR_FAIL(list, i, value)        \
    do {                                   \
        PyObject *v_ = (value);            \
        if (v_ == NULL) {                  \
            goto fail;                     \
        }                                  \
        PyList_SET_ITEM((list), (i), v_); \
    } while (0)

/* (keys, parent, key, group, shadowed, start_end, totals, self_kernels, outside, launched,
 * misnested, repeated): `Tally`'s fields in its order. */
static PyObject *tally(Sweep *s) {
    PyObject *keys = NULL, *parent = NULL, *key = NULL, *group = NULL, *shadowed = NULL, *start_end = NULL,
             *totals = NULL, *kernels = NULL, *outside_dict = NULL, *launched = NULL, *repeated = NULL;
    Py_ssize_t n = (Py_ssize_t)s->nodes;
    keys = PyList_New((Py_ssize_t)s->nkeys);
    parent = PyList_New(n);
    key = PyList_New(n);
    group = PyList_New(n);
    shadowed = PyList_New(n);
    start_end = PyList_New(n);
    totals = PyList_New(n);
    kernels = PyDict_New();
    outside_dict = PyDict_New();
    repeated = PyDict_New();
    launched = work_list(s->launched, NWORK);
    if (!keys || !parent || !key || !group || !shadowed || !start_end || !totals || !kernels || !outside_dict ||
        !repeated || !launched) {
        goto fail;
    }
    for (size_t k = 0; k < s->nkeys; k++) {
        PyObject *name = PyList_GET_ITEM(s->strings, s->key_sid[k]);
        SET_OR_FAIL(keys, (Py_ssize_t)k, Py_BuildValue("(LO)", (long long)s->key_domain[k], name));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        SET_OR_FAIL(parent, i, PyLong_FromLong(s->parent[i]));
        SET_OR_FAIL(key, i, PyLong_FromLong(s->key[i]));
        PyObject *label = PyList_GET_ITEM(s->groups, s->group[i]);
        Py_INCREF(label);
        PyList_SET_ITEM(group, i, label);
        SET_OR_FAIL(shadowed, i, PyBool_FromLong(s->shadowed[i]));
        SET_OR_FAIL(start_end, i, PyBool_FromLong(s->start_end[i]));
        SET_OR_FAIL(totals, i, work_list(&s->totals[(size_t)i * NTOTALS], NTOTALS));
    }
    for (size_t i = 0; i < s->nkernels; i++) {
        KernelEntry *e = &s->kernels[i];
        PyObject *slot;
        if (e->tag == 0) {
            slot = Py_BuildValue("(iL)", e->node, (long long)e->value);
        } else if (e->tag == 1) {
            slot = Py_BuildValue("(iO)", e->node, PyList_GET_ITEM(s->strings, e->value));
        } else {
            slot = Py_BuildValue("(iO)", e->node, Py_None);
        }
        PyObject *seen = Py_BuildValue("[LL]", (long long)e->count, (long long)e->ns);
        int failed = slot == NULL || seen == NULL || PyDict_SetItem(kernels, slot, seen) < 0;
        Py_XDECREF(slot);
        Py_XDECREF(seen);
        if (failed) {
            goto fail;
        }
    }
    for (size_t i = 0; i < s->noutside; i++) {
        PyObject *work = work_list(s->outside[i].work, NWORK);
        int failed =
            work == NULL || PyDict_SetItem(outside_dict, PyList_GET_ITEM(s->groups, s->outside[i].group), work) < 0;
        Py_XDECREF(work);
        if (failed) {
            goto fail;
        }
    }
    for (size_t i = 0; i < s->nrepeats; i++) {
        PyObject *node = PyLong_FromLong(s->repeats[i].node);
        PyObject *work = work_list(s->repeats[i].work, NWORK);
        int failed = node == NULL || work == NULL || PyDict_SetItem(repeated, node, work) < 0;
        Py_XDECREF(node);
        Py_XDECREF(work);
        if (failed) {
            goto fail;
        }
    }
    return Py_BuildValue("(NNNNNNNNNNLN)", keys, parent, key, group, shadowed, start_end, totals, kernels,
                         outside_dict, launched, (long long)s->misnested, repeated);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(parent);
    Py_XDECREF(key);
    Py_XDECREF(group);
    Py_XDECREF(shadowed);
    Py_XDECREF(start_end);
    Py_XDECREF(totals);
    Py_XDECREF(kernels);
    Py_XDECREF(outside_dict);
    Py_XDECREF(launched);
    Py_XDECREF(repeated);
    return NULL;
}

static void sweep_free(Sweep *s) {
    Py_XDECREF(s->strings);
    Py_XDECREF(s->sid_of);
    Py_XDECREF(s->groups);
    Py_XDECREF(s->gid_of);
    free(s->texts.slots);
    free(s->texts.bytes);
    free(s->raw_sid);
    free(s->raw_renamed);
    free(s->group_root);
    free(s->group_outside);
    for (size_t i = 0; i < s->nthreads; i++) {
        free(s->threads[i].stack.items);
        free(s->threads[i].active.items);
    }
    free(s->threads);
    free(s->parent);
    free(s->key);
    free(s->group);
    free(s->shadowed);
    free(s->start_end);
    free(s->totals);
    free(s->key_domain);
    free(s->key_sid);
    free(s->counted);
    free(s->kernels);
    free(s->repeats);
    free(s->outside);
    map_free(&s->thread_of);
    map_free(&s->node_of);
    free(s->next_key);
    free(s->first_key);
    free(s->owner);
    free(s->owned);
    free(s->renumbered_keys);
    map_free(&s->names);
    map_free(&s->kernel_of);
    map_free(&s->repeat_of);
    map_free(&s->renumbered);
}

static PyObject *SQLiteError;

PyDoc_STRVAR(run_doc,
             "run(uri, ranges, launches, group_of, rename, only_with_work, renumbered, hint=0)\n--\n\n"
             "Sweep an export's ranges and launches as sweep.Sweep.run does. `uri`: the export as\n"
             "export._connect opens it; `ranges`, `launches`: (sql, args) or None; `group_of`: globalTid\n"
             "-> group label; `rename`: str -> str or None; `renumbered`: {(globalPid, domainId): key};\n"
             "`hint`: about how many NVTX events the export holds (its tables are sized for them).\n"
             "Returns Tally's fields as a tuple, or None where the Python sweep must run instead;\n"
             "raises SQLiteError (SQLite's message) where the export cannot be read.");

static PyObject *run(PyObject *module, PyObject *args) {
    (void)module;
    const char *uri;
    PyObject *ranges_query, *launches_query, *group_of, *rename, *renumbered;
    int only_with_work;
    Py_ssize_t hint = 0;
    if (!PyArg_ParseTuple(args, "sOOOOpO!|n", &uri, &ranges_query, &launches_query, &group_of, &rename,
                          &only_with_work, &PyDict_Type, &renumbered, &hint)) {
        return NULL;
    }
    if (resolve_sqlite() < 0) {
        Py_RETURN_NONE;
    }
    Sweep s;
    memset(&s, 0, sizeof s);
    s.group_of = group_of;
    s.rename = rename;
    s.only_with_work = only_with_work;
    PyObject *result = NULL;
    sqlite3 *db = NULL;
    sqlite3_stmt *ranges = NULL, *launches = NULL;
    s.strings = PyList_New(0);
    s.groups = PyList_New(0);
    s.gid_of = PyDict_New();
    /* Tables sized for the export (`hint`: about how many NVTX events it holds) from the start:
     * growing them step by step costs more (each step a new table, its pages faulted in). */
    size_t expected = hint > 0 ? (size_t)hint : 0;
    {
        size_t size = 1024;
        while (size < expected * 2 && size < PRESIZED_AT_MOST) {
            size *= 2;
        }
        s.texts.slots = calloc(size, sizeof(TextSlot));
        s.texts.mask = size - 1;
    }
    s.renumbered_keys = malloc((size_t)(PyDict_GET_SIZE(renumbered) + 1) * sizeof(int64_t));
    if (!s.strings || !s.groups || !s.gid_of || !s.texts.slots || !s.renumbered_keys ||
        map_init(&s.thread_of, 0, 64) || map_init(&s.node_of, expected, 1024) || map_init(&s.names, 0, 64) ||
        map_init(&s.kernel_of, 0, 1024) || map_init(&s.repeat_of, 0, 64) ||
        map_init(&s.renumbered, (size_t)PyDict_GET_SIZE(renumbered), 64)) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    {
        /* "" first, as a text read (the empty name and the key of a NULL one are the same str) */
        int32_t raw = raw_text(&s, "", 0);
        if (raw < 0) {
            goto done;
        }
        s.empty_sid = s.raw_sid[raw];
    }
    {
        Py_ssize_t at = 0;
        PyObject *pair, *value;
        while (PyDict_Next(renumbered, &at, &pair, &value)) {
            long long pid, domain, key;
            if (!PyArg_ParseTuple(pair, "LL", &pid, &domain) || (key = PyLong_AsLongLong(value), PyErr_Occurred())) {
                goto done;
            }
            Slot *slot = map_find(&s.renumbered, pid, domain, 0);
            int32_t at = (int32_t)s.renumbered.count;
            if (!USED(slot)) {
                s.renumbered_keys[at] = key;
                if (map_claim(&s.renumbered, slot, pid, domain, 0, at) < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
        }
    }
    int outcome;
    /* As export._connect: the URI (read-only, immutable) with the flags Python's connect uses,
     * then query_only; NOMUTEX besides: the connection is this call's alone (SQLite then takes
     * no lock in each sqlite3_column_* call). */
    if (sq.open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                   NULL) != SQLITE_OK) {
        outcome = SQLERROR;
    } else {
        sqlite3_stmt *pragma = NULL;
        outcome = ROW;
        /* (No memory-mapped I/O: a file cut while it is read would be a SIGBUS, not a message.) */
        if (sq.prepare_v2(db, "PRAGMA query_only = 1", -1, &pragma, NULL) != SQLITE_OK) {
            outcome = SQLERROR;
        } else {
            int rc = sq.step(pragma);
            if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
                outcome = SQLERROR;
            }
        }
        sq.finalize(pragma);
        int failed = 0, first = SQLITE_DONE;
        if (outcome == ROW) {
            ranges = prepare(&s, db, ranges_query, &failed);
        }
        if (outcome == ROW && !failed && ranges != NULL) {
            first = sq.step(ranges);
            if (first != SQLITE_ROW && first != SQLITE_DONE) {
                failed = SQLERROR;
            }
        }
        if (outcome == ROW && !failed) {
            launches = prepare(&s, db, launches_query, &failed);
        }
        if (failed) {
            outcome = failed;
        }
        if (outcome == ROW) {
            outcome = sweep(&s, ranges, first, launches);
        }
    }
    if (outcome == SQLERROR) {
        PyErr_SetString(SQLiteError, db ? sq.errmsg(db) : "out of memory");
    } else if (outcome == UNSUPPORTED || (outcome == ROW && s.overflow)) {
        result = Py_None;
        Py_INCREF(result);
    } else if (outcome == ROW) {
        result = tally(&s);
    }
done:
    if (ranges) {
        sq.finalize(ranges);
    }
    if (launches) {
        sq.finalize(launches);
    }
    if (db) {
        sq.close(db);
    }
    sweep_free(&s);
    return result;
}

static PyObject *unavailable(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    if (resolve_sqlite() < 0) {
        return PyUnicode_FromString(sq.missing);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, run_doc},
    {"unavailable", unavailable, METH_NOARGS,
     PyDoc_STR("None when SQLite's functions were found in the process; else why not (the Python sweep runs).")},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *module) {
    SQLiteError = PyErr_NewExceptionWithDoc("autonvtx.report.nsys._sweep.SQLiteError",
                                            "SQLite could not read the export (the message is SQLite's).", NULL, NULL);
    if (SQLiteError == NULL) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "SQLiteError", SQLiteError);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "autonvtx.report.nsys._sweep",
    .m_doc = "The report's sweep of an Nsight Systems export in C (see autonvtx/report/nsys/sweep.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__sweep(void) {
    return PyModuleDef_Init(&definition);
}
