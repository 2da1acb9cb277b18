/* The native sweep's shared declarations (the module is sweep.c; sweep_sqlite.c reads the
 * export, sweep_order.c orders what a small export holds in memory, sweep_tables.c holds the
 * tables, names and threads, sweep_walk.c walks ranges and launches as report/nsys/sweep.py's
 * Sweep.run does). */
#ifndef AUTONVTX_SWEEP_H
#define AUTONVTX_SWEEP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

typedef struct {
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
} SQLiteApi;

extern SQLiteApi sq;

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

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t hash3(int64_t a, int64_t b, int32_t c)
{
    return mix((uint64_t)a * 0x9e3779b97f4a7c15ULL + mix((uint64_t)b ^ ((uint64_t)(uint32_t)c << 17)));
}

/* Tables are sized from the export's number of NVTX events up to this many slots (6 to 8 MB);
 * past it they grow as they fill (the hint overstates what a grouped report or a thread set
 * needs, and every slot of a large table ends up touched). */
#define PRESIZED_AT_MOST ((size_t)1 << 18)

/* The slot holding (a, b, c), or the empty slot where it would go. */
static inline Slot *map_find(Map *map, int64_t a, int64_t b, int32_t c)
{
    size_t i = hash3(a, b, c) & map->mask;
    for (;;) {
        Slot *slot = &map->slots[i];
        if (!USED(slot) || (slot->a == a && slot->b == b && slot->c == c)) {
            return slot;
        }
        i = (i + 1) & map->mask;
    }
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
    size_t *raw_at, *raw_length; /* per raw text: where its bytes are in `texts.bytes` */
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

static inline void add(Sweep *s, int64_t *into, int64_t value)
{
    if (__builtin_add_overflow(*into, value, into)) {
        s->overflow = 1;
    }
}

static inline int64_t difference(Sweep *s, int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d)) {
        s->overflow = 1;
        return 0;
    }
    return d;
}

typedef struct {
    int64_t global_tid, at, kind, gpu_start, gpu_end, size;
    int32_t kernel_tag;
    int32_t kernel_raw; /* tag 1: the name's raw text (its bytes order the launches joined here) */
    int64_t kernel;
} Launch;

/* A range read: (globalTid, start, end, domain key, name), `row` its rowid (read where the
 * ranges are ordered here: the last key of their order), `start_end` whether it is a
 * start/end range. */
typedef struct {
    int64_t global_tid, start, end, domain, row;
    int32_t raw, sid;
    uint8_t start_end;
} Range;

/* The ranges as the walk takes them: stepped from the ordered query (`stmt`, whose first step
 * gave `first`), or read whole and put in order here (`items`: sweep_order.c). */
typedef struct {
    sqlite3_stmt *stmt;
    int first, stepped, done;
    Range *items;
    size_t count, capacity, next;
    int whole;
} Ranges;

/* A launch joined here (sweep_order.c): what the walk reads, and the columns of the SQL's order
 * the walk does not (the device; whether device and bytes were NULL). */
typedef struct {
    Launch w;
    int64_t device;
    uint8_t device_null, size_null;
} Joined;

/* The launches as the walk takes them: stepped from the ordered query (`stmt`), or joined and
 * put in order here (`items`). */
typedef struct {
    sqlite3_stmt *stmt;
    int done;
    Joined *items;
    size_t count, capacity, next;
    int whole;
} Launches;

static inline void add_work(Sweep *s, int64_t *into, int kind, int64_t duration, int64_t size)
{
    add(s, &into[SLOTS[kind][0]], 1);
    add(s, &into[SLOTS[kind][2]], duration);
    if (SLOTS[kind][1] >= 0) {
        add(s, &into[SLOTS[kind][1]], size);
    }
}


/* Outcome of reading a row: 1 a row, 0 no more, -1 a Python error, -2 an SQLite error (message
 * in the connection), -3 a value the Python sweep must read (s->unsupported set). */
enum { ROW = 1, END = 0, PYERROR = -1, SQLERROR = -2, UNSUPPORTED = -3 };

/* The text column's sid (NONE for NULL), or NOT_TEXT for another type, TEXT_ERROR for a Python
 * error. */
enum { NOT_TEXT = -2, TEXT_ERROR = -3 };
/* How many instances of `key` a thread's stack holds (`Sweep._Thread.names`). Nearly always one
 * thread at a time holds a key: its count lives with the key (`owner`, `owned`); another thread
 * holding the key meanwhile counts in the `names` table. A thread's count is the sum of both. */
static inline int64_t names_get(Sweep *s, int32_t thread, int32_t key)
{
    int64_t count = s->owner[key] == thread ? s->owned[key] : 0;
    if (s->names.count) {
        Slot *slot = map_find(&s->names, thread, key, 0);
        if (USED(slot)) {
            count += VALUE(slot);
        }
    }
    return count;
}


/* An integer column: 0, or -1 when it holds another type (NULL included). */
static inline int integer(sqlite3_stmt *stmt, int column, int64_t *into)
{
    if (sq.column_type(stmt, column) != SQLITE_INTEGER) {
        return -1;
    }
    *into = sq.column_int64(stmt, column);
    return 0;
}

/* sweep_sqlite.c: SQLite found in the process, and the rows read. */
int resolve_sqlite(void);
int open_read_only(const char* uri, sqlite3** db);
sqlite3_stmt* prepare(Sweep* s, sqlite3* db, PyObject* query, int* failed);
int32_t text_column(Sweep* s, sqlite3_stmt* stmt, int column, int32_t* raw);
int read_range(Sweep* s, sqlite3_stmt* stmt, Range* r);
int read_launch(Sweep* s, sqlite3_stmt* stmt, Launch* w);
int next_range(Sweep* s, Ranges* from, Range* r);
int next_launch(Sweep* s, Launches* from, Launch* w);

/* sweep_tables.c: the hash tables, texts and names, keys, the tree's nodes, threads. */
int map_init(Map* map, size_t expected, size_t least);
void map_free(Map* map);
int map_claim(Map* map, Slot* slot, int64_t a, int64_t b, int32_t c, int32_t value);
void* grown_array(void* old, size_t items, size_t size, int* failed);
int32_t raw_text(Sweep* s, const char* p, size_t n);
int32_t range_name(Sweep* s, int32_t raw);
int32_t add_node(Sweep* s, int32_t parent, int32_t key, int32_t group, int shadowed, int start_end);
int32_t key_of(Sweep* s, int64_t domain, int32_t sid);
int names_add(Sweep* s, int32_t thread, int32_t key, int delta);
int32_t thread_of(Sweep* s, int64_t global_tid);

/* sweep_walk.c: the whole walk. */
int sweep(Sweep* s, Ranges* ranges, Launches* launches);

/* sweep_order.c: ranges and launches read whole and put in the SQL's order here. */
int order_ranges(Sweep* s, Ranges* ranges, size_t hint);
int join_launches(Sweep* s, sqlite3* db, PyObject* plan, Launches* out);

/* sweep_rows.c: the rows per range name. `parts`: (Row, Work, KernelShare, domain_name,
 * kernel_names, top[, rows_only]); `*rows_only` gets the last. A list of rows, None (a sum past
 * 64 bits), or NULL with a Python error. */
PyObject* sweep_rows(Sweep* s, PyObject* parts, int* rows_only);

/* sweep_check.c: export.NsysExport._check_integers in one pass; the module's exception. */
PyObject* wrong_type(PyObject* module, PyObject* args);
extern const char wrong_type_doc[];
extern PyObject* SQLiteError;

#endif
