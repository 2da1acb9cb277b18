/* The figures of a per-name table in C (autonvtx.report._rowtext): an integer as Python's
 * f"{n:,}" writes it, and a duration as report/render/text.py's format_duration writes it.
 * tests/test_rowtext.py holds each to its Python twin. */
#ifndef AUTONVTX_ROWFIGURES_H
#define AUTONVTX_ROWFIGURES_H

#include <stddef.h>

/* `value` with thousands separators; returns its length (out holds at least 32 bytes). */
int grouped(char *out, long long value);

/* `ns` in the largest unit that keeps it >= 1 ("812 ns", "3.250 us"), as format_duration
 * writes it (`out` holds `size` bytes, at least 32); returns its length. */
int duration(char *out, size_t size, long long ns);

/* 100 * part / whole as Python's f"{100 * part / whole:.{decimals}f}" writes it (decimals 0 or
 * 1; 0 <= part < 2^53 / 1000, 0 < whole < 2^53), worked out from the integers; returns its
 * length, or -1 where they cannot tell (a tie, or a value within the double's error of one):
 * the caller formats the double then. */
int share_digits(char *out, long long part, long long whole, int decimals);

#endif
