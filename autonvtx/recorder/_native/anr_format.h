/*
 * The `.anr` recording format, defined once: the recorder writes it (spill.c), the exporter
 * reads it (export.c), and autonvtx/recorder/recording.py reads it in Python (a test checks its
 * constants against this file).
 *
 * Version 2; little-endian, as written natively on x86-64/aarch64; every item starts 8-byte
 * aligned; "str" means bytes without terminator, padded with zeros to 8. A file is a header,
 * then sections appended write after write; readers read to the end. Of a last section cut
 * short (the process killed mid-write), they keep the whole entries before the cut when it is
 * a THREAD section (its head whole) or a registry, and leave out any other.
 *
 *   header (ANR_HEADER_SIZE = 64 bytes):
 *     char  magic[8] = "ANVTXREC"
 *     u32   version = 2        u32 header_size = 64
 *     u32   pid                u32 ppid
 *     u64   created_ns         CLOCK_MONOTONIC when the file was created
 *     i64   realtime_offset_ns CLOCK_REALTIME - CLOCK_MONOTONIC then
 *     u64   reserved[3] = 0
 *   sections: u32 tag   u32 reserved   u64 length   then `length` bytes (a multiple of 8)
 *     tag 1 CMDLINE:    the bytes of /proc/self/cmdline (NUL-separated), padded; first
 *     tag 2 DOMAINS:    entries { u32 id; u32 len; str name }        (core domain 0 = "" implicit)
 *     tag 3 STRINGS:    entries { u32 id; u32 domain; u32 len; u32 0; str text }   registered
 *     tag 4 CATEGORIES: entries { u32 domain; u32 category; u32 len; u32 0; str name }  last wins
 *     tag 5 THREAD:     u32 tid; u32 index; u64 dropped; u64 events; u32 name_len; u32 flags
 *                       (ANR_THREAD_WRAPPED: keep-last let older events go); str name (pthread
 *                       name at first event); then event records continuing the thread's (same
 *                       index) earlier ones. `dropped` counts events left out for want of memory:
 *                       whole ranges only (a push and its pop, a start and its end), never half.
 *     tag 6 THREAD_NAMES: entries { u32 tid; u32 len; str name }   nvtxNameOsThread, last wins
 *     tag 7 SPILL:      u64 ns; i64 realtime_offset_ns; u64 events; u64 dropped; u64 discarded;
 *                       u32 final; u32 0 -- ends each write; final = 1 at a normal exit
 *   Each write holds only what is new since the previous one (registries included). Open
 *   ranges end at the last SPILL's ns; a file whose last SPILL is not final comes from a
 *   process that died. Unknown tags are skipped by readers.
 *
 *   event record (an anr_record_head, then):
 *     u8 kind (ANR_K_*: 1 push, 2 pop, 3 start, 4 end, 5 mark)
 *     u8 flags (ANR_F_COLOR = has color, ANR_F_CATEGORY = has category)
 *     u8 payload type (0 none, else nvtxPayloadType_t 1..6: u64 i64 double u32 i32 float)
 *     u8 message kind (ANR_M_*: 0 none, 1 inline UTF-8, 2 registered string id)
 *     u32 domain id (0 = core domain)
 *     u64 timestamp (CLOCK_MONOTONIC ns)
 *     [u64 range id]            start and end only
 *     [u64 payload]             when payload type != 0: the raw 8-byte union (4-byte types in the
 *                               low-address half)
 *     [u32 color]               0xAARRGGBB, when flags & ANR_F_COLOR
 *     [u32 category]            when flags & ANR_F_CATEGORY
 *     [u32 string id]           message kind 2
 *     [u32 len; bytes]          message kind 1
 *     zero padding to a multiple of 8
 */
#ifndef AUTONVTX_ANR_FORMAT_H
#define AUTONVTX_ANR_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define ANR_MAGIC "ANVTXREC"
#define ANR_MAGIC_BYTES 8u
#define ANR_VERSION 2u
#define ANR_HEADER_SIZE 64u
#define ANR_SECTION_HEAD_BYTES 16u   /* u32 tag, u32 reserved, u64 length */
#define ANR_THREAD_HEAD_BYTES 32u    /* a THREAD section's fixed part, before its name */
#define ANR_SPILL_BYTES 48u          /* a SPILL section's body */
#define ANR_PAYLOAD_MAX 6u           /* highest payload type (float) */

#define ANR_ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

/* Section tags. */
enum {
    ANR_T_END = 0, ANR_T_CMDLINE = 1, ANR_T_DOMAINS = 2, ANR_T_STRINGS = 3, ANR_T_CATEGORIES = 4,
    ANR_T_THREAD = 5, ANR_T_THREAD_NAMES = 6, ANR_T_SPILL = 7
};

/* Event kinds, record flags, message kinds. */
enum { ANR_K_PUSH = 1, ANR_K_POP = 2, ANR_K_START = 3, ANR_K_END = 4, ANR_K_MARK = 5 };
enum { ANR_F_COLOR = 1, ANR_F_CATEGORY = 2 };
enum { ANR_M_NONE = 0, ANR_M_INLINE = 1, ANR_M_REGISTERED = 2 };

/* THREAD section flags. */
enum { ANR_THREAD_WRAPPED = 1 };

/* The first 16 bytes of every event record. */
typedef struct anr_record_head {
    uint8_t kind;
    uint8_t flags;
    uint8_t payload_type;
    uint8_t message_kind;
    uint32_t domain;
    uint64_t ts;
} anr_record_head;

_Static_assert(sizeof(anr_record_head) == 16, "an event record's head is 16 bytes");

/* Bytes of the event record at p (its length follows from its head), or 0 if it runs past
   `avail` (a record cut short, or a corrupt length). Reads nothing past `avail`. */
static inline size_t anr_record_size(const char* p, size_t avail)
{
    anr_record_head h;
    size_t n = sizeof(anr_record_head);
    if (avail < n)
        return 0;
    __builtin_memcpy(&h, p, sizeof(h));
    if (h.kind == ANR_K_START || h.kind == ANR_K_END)
        n += 8;
    if (h.payload_type)
        n += 8;
    if (h.flags & ANR_F_COLOR)
        n += 4;
    if (h.flags & ANR_F_CATEGORY)
        n += 4;
    if (h.message_kind == ANR_M_REGISTERED) {
        n += 4;
    } else if (h.message_kind == ANR_M_INLINE) {
        uint32_t len;
        if (avail < n + 4)
            return 0;
        __builtin_memcpy(&len, p + n, 4);
        if ((uint64_t)len > (uint64_t)avail)
            return 0;
        n += 4 + (size_t)len;
    }
    n = ANR_ALIGN8(n);
    return n <= avail ? n : 0;
}

#endif
