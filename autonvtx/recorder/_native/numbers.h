/*
 * The numbers in a range's name, by one rule wherever names are folded into rows: the exporter's
 * statistics (export_stats.c), the recorder's flight scanner (flight.c) and the NVTX client's
 * flight watch (autonvtx/_native/flightwatch.c), so that a name is one range there exactly when
 * it is one row of the summary (autonvtx/stats/model.py, name_template, is the Python twin).
 */
#ifndef AUTONVTX_NUMBERS_H
#define AUTONVTX_NUMBERS_H

#include <stddef.h>

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_hex(unsigned char c) { return is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
/* A letter, a digit, or a byte of a non-ASCII character: what a number must not touch. */
static inline int is_word(unsigned char c)
{
    return is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80;
}

/* The end of the number that starts at s[i], or i when none does: a run of digits or a 0x hex
 * literal that no word byte touches, not one end of a span "A-B". */
static inline size_t number_end(const unsigned char* s, size_t n, size_t i)
{
    size_t j;
    if (!is_digit(s[i]) || (i > 0 && is_word(s[i - 1])) || (i > 1 && s[i - 1] == '-' && is_digit(s[i - 2])))
        return i;
    if (s[i] == '0' && i + 2 < n && (s[i + 1] | 32) == 'x' && is_hex(s[i + 2]))
        for (j = i + 2; j < n && is_hex(s[j]); ++j)
            ;
    else
        for (j = i; j < n && is_digit(s[j]); ++j)
            ;
    /* A hex literal that a word byte ends is no number, and neither is its "0" (an 'x' follows). */
    if ((j < n && is_word(s[j])) || (j + 1 < n && s[j] == '-' && is_digit(s[j + 1])))
        return i;
    return j;
}

#endif
