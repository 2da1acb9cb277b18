/* What NVTX events refer to by handle or number: domains, registered strings, category names,
   thread names. Registered once, kept for the process's life, written incrementally (spill.c). */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include "recorder.h"

domain_entry* g_domains;
uint32_t g_domain_count;
/* Hash indexes (power-of-two sizes) of domains by name and strings by domain and text, grown
   as they fill so that a lookup stays O(1) however many a program registers: a list of domains
   and a fixed table of strings made 100k domains and 1M strings quadratic (issue 21). If an
   index cannot grow, the one it has still answers, only slower. Under g_lock. */
static domain_entry** g_domain_index;
static size_t g_domain_index_size;
static string_entry** g_string_index;
static size_t g_string_index_size;
string_entry* g_strings_first;
string_entry* g_strings_last;
static uint32_t g_string_count;
named_entry* g_categories;
named_entry* g_thread_names;

/* ---- strings ---- */

/* UTF-32 (Linux wchar_t) to UTF-8; invalid code points become U+FFFD. Returns bytes written. */
size_t utf8_from_wide(const wchar_t* w, char* out, size_t cap)
{
    size_t n = 0;
    for (; *w; ++w) {
        uint32_t c = (uint32_t)*w;
        char tmp[4];
        size_t k;
        if (c >= 0xD800 && c <= 0xDFFF)
            c = 0xFFFD;
        if (c < 0x80) {
            tmp[0] = (char)c; k = 1;
        } else if (c < 0x800) {
            tmp[0] = (char)(0xC0 | (c >> 6)); tmp[1] = (char)(0x80 | (c & 0x3F)); k = 2;
        } else if (c < 0x10000) {
            tmp[0] = (char)(0xE0 | (c >> 12)); tmp[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            tmp[2] = (char)(0x80 | (c & 0x3F)); k = 3;
        } else if (c < 0x110000) {
            tmp[0] = (char)(0xF0 | (c >> 18)); tmp[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            tmp[2] = (char)(0x80 | ((c >> 6) & 0x3F)); tmp[3] = (char)(0x80 | (c & 0x3F)); k = 4;
        } else {
            tmp[0] = (char)0xEF; tmp[1] = (char)0xBF; tmp[2] = (char)0xBD; k = 3;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, tmp, k);
        n += k;
    }
    return n;
}

/* A malloc'ed UTF-8 copy of a wide string (rare paths: names, registrations). */
static char* dup_wide(const wchar_t* w)
{
    size_t len = w ? wcslen(w) : 0;
    char* s = malloc(len * 4 + 1);
    if (!s)
        return NULL;
    s[w ? utf8_from_wide(w, s, len * 4) : 0] = '\0';
    return s;
}

/* ---- metadata: categories, thread names, domains, registered strings ---- */

static void add_named(named_entry** list, uint32_t a, uint32_t b, char* name)
{
    named_entry* e;
    if (!name)
        return;
    e = malloc(sizeof(*e));
    if (!e) {
        free(name);
        return;
    }
    e->a = a;
    e->b = b;
    e->name = name;
    pthread_mutex_lock(&g_lock);
    e->next = *list;
    *list = e;
    pthread_mutex_unlock(&g_lock);
}

static void NVTX_API rec_NameCategoryA(uint32_t c, const char* n) { add_named(&g_categories, 0, c, strdup(n ? n : "")); }
static void NVTX_API rec_NameCategoryW(uint32_t c, const wchar_t* n) { add_named(&g_categories, 0, c, dup_wide(n)); }
static void NVTX_API rec_NameOsThreadA(uint32_t t, const char* n) { add_named(&g_thread_names, t, 0, strdup(n ? n : "")); }
static void NVTX_API rec_NameOsThreadW(uint32_t t, const wchar_t* n) { add_named(&g_thread_names, t, 0, dup_wide(n)); }

static uint32_t hash_string(uint32_t domain, const char* s)
{
    uint32_t h = 2166136261u ^ domain;
    for (; *s; ++s)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void grow_domain_index(void)
{
    size_t size = g_domain_index_size ? g_domain_index_size * 2 : 64;
    domain_entry** index = calloc(size, sizeof(*index));
    if (!index)
        return;
    for (domain_entry* d = g_domains; d; d = d->next) {
        size_t b = hash_string(0, d->name) & (size - 1);
        d->hnext = index[b];
        index[b] = d;
    }
    free(g_domain_index);
    g_domain_index = index;
    g_domain_index_size = size;
}

static domain_entry* find_domain(const char* name)
{
    domain_entry* d = g_domain_index ? g_domain_index[hash_string(0, name) & (g_domain_index_size - 1)] : g_domains;
    for (; d; d = g_domain_index ? d->hnext : d->next)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

static nvtxDomainHandle_t domain_create(char* name)
{
    domain_entry* d;
    if (!name)
        return NULL;
    pthread_mutex_lock(&g_lock);
    d = find_domain(name);
    if (!d && (d = malloc(sizeof(*d))) != NULL) {
        if (g_domain_count >= g_domain_index_size)
            grow_domain_index();  /* before the new one joins the list: it is indexed below */
        d->id = ++g_domain_count;
        d->name = name;
        name = NULL;
        d->next = g_domains;
        g_domains = d;
        d->hnext = NULL;
        if (g_domain_index) {
            size_t b = hash_string(0, d->name) & (g_domain_index_size - 1);
            d->hnext = g_domain_index[b];
            g_domain_index[b] = d;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(name);
    return (nvtxDomainHandle_t)(void*)d;
}

static void grow_string_index(void)
{
    size_t size = g_string_index_size ? g_string_index_size * 2 : 4096;
    string_entry** index = calloc(size, sizeof(*index));
    if (!index)
        return;
    for (string_entry* e = g_strings_first; e; e = e->next_in_order) {
        size_t b = hash_string(e->domain, e->text) & (size - 1);
        e->next = index[b];
        index[b] = e;
    }
    free(g_string_index);
    g_string_index = index;
    g_string_index_size = size;
}

static nvtxStringHandle_t string_register(uint32_t domain, char* text)
{
    string_entry* e = NULL;
    uint32_t hash;
    if (!text)
        return NULL;
    hash = hash_string(domain, text);
    pthread_mutex_lock(&g_lock);
    if (g_string_count >= g_string_index_size)
        grow_string_index();  /* before a new one joins the list: it is indexed below */
    if (!g_string_index) {  /* no memory for even the first index */
        pthread_mutex_unlock(&g_lock);
        free(text);
        return NULL;
    }
    for (e = g_string_index[hash & (g_string_index_size - 1)]; e; e = e->next)
        if (e->domain == domain && strcmp(e->text, text) == 0)
            break;
    if (!e && (e = malloc(sizeof(*e))) != NULL) {
        e->id = ++g_string_count;
        e->domain = domain;
        e->text = text;
        e->len = (uint32_t)strlen(text);
        text = NULL;
        e->next_in_order = NULL;
        if (g_strings_last)
            g_strings_last->next_in_order = e;
        else
            g_strings_first = e;
        g_strings_last = e;
        e->next = g_string_index[hash & (g_string_index_size - 1)];
        g_string_index[hash & (g_string_index_size - 1)] = e;
    }
    pthread_mutex_unlock(&g_lock);
    free(text);
    return (nvtxStringHandle_t)(void*)e;
}

static void NVTX_API rec_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char* n) { add_named(&g_categories, domain_id(d), c, strdup(n ? n : "")); }
static void NVTX_API rec_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t* n) { add_named(&g_categories, domain_id(d), c, dup_wide(n)); }
static nvtxStringHandle_t NVTX_API rec_DomainRegisterStringA(nvtxDomainHandle_t d, const char* s) { return string_register(domain_id(d), strdup(s ? s : "")); }
static nvtxStringHandle_t NVTX_API rec_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* s) { return string_register(domain_id(d), dup_wide(s)); }
static nvtxDomainHandle_t NVTX_API rec_DomainCreateA(const char* n) { return domain_create(strdup(n ? n : "")); }
static nvtxDomainHandle_t NVTX_API rec_DomainCreateW(const wchar_t* n) { return domain_create(dup_wide(n)); }

void free_named(named_entry* e)
{
    while (e) {
        named_entry* next = e->next;
        free(e->name);
        free(e);
        e = next;
    }
}

const slot g_registry_slots[] = {
    /* Live in no-op mode too: handles must stay valid whatever the mode. */
    CORE(NameCategoryA, rec_NameCategoryA, rec_NameCategoryA),
    CORE(NameCategoryW, rec_NameCategoryW, rec_NameCategoryW),
    CORE(NameOsThreadA, rec_NameOsThreadA, rec_NameOsThreadA),
    CORE(NameOsThreadW, rec_NameOsThreadW, rec_NameOsThreadW),
    CORE2(DomainNameCategoryA, rec_DomainNameCategoryA, rec_DomainNameCategoryA),
    CORE2(DomainNameCategoryW, rec_DomainNameCategoryW, rec_DomainNameCategoryW),
    CORE2(DomainRegisterStringA, rec_DomainRegisterStringA, rec_DomainRegisterStringA),
    CORE2(DomainRegisterStringW, rec_DomainRegisterStringW, rec_DomainRegisterStringW),
    CORE2(DomainCreateA, rec_DomainCreateA, rec_DomainCreateA),
    CORE2(DomainCreateW, rec_DomainCreateW, rec_DomainCreateW),
};
const size_t g_registry_slot_count = sizeof(g_registry_slots) / sizeof(g_registry_slots[0]);
