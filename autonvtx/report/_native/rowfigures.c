/* The figures of a per-name table, as Python writes them: see rowfigures.h. Split from
 * rowtext.c, which writes the table. */
#include "rowfigures.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- figures ------------------------------------------------------------------------------ */

/* An integer as Python's f"{n:,}" writes it. Returns its length. */
int grouped(char *out, long long value) {
    char digits[32];
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    int n = 0;
    do {
        digits[n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    int len = 0;
    if (value < 0)
        out[len++] = '-';
    for (int i = n - 1; i >= 0; i--) {
        out[len++] = digits[i];
        if (i > 0 && i % 3 == 0)
            out[len++] = ',';
    }
    out[len] = '\0';
    return len;
}

/* A "%.3f" text with its integer part grouped by thousands, as Python's ",.3f". -1: no room. */
static int grouped_fixed(char *out, size_t size, double value, const char *unit) {
    char plain[400];
    int n = snprintf(plain, sizeof plain, "%.3f", value);
    if (n < 0 || (size_t)n >= sizeof plain)
        return -1;
    const char *point = strchr(plain, '.');
    int start = plain[0] == '-' ? 1 : 0;
    int whole = (int)(point - plain) - start;
    size_t need = (size_t)n + (size_t)(whole / 3) + strlen(unit) + 1;
    if (need >= size)
        return -1;
    int len = 0;
    if (start)
        out[len++] = '-';
    for (int i = 0; i < whole; i++) {
        out[len++] = plain[start + i];
        int left = whole - i - 1;
        if (left > 0 && left % 3 == 0)
            out[len++] = ',';
    }
    len += sprintf(out + len, "%s%s", point, unit);
    return len;
}

/* `whole` (none where negative), then `.fraction` in three digits (none where negative), then
 * `unit`: format_duration's "%d.%03d us" without printf's parsing (a report writes 100,000). */
static int digits_unit(char *out, long long whole, long long fraction, const char *unit) {
    int len = 0;
    if (whole >= 0) {
        char digits[24];
        int n = 0;
        do {
            digits[n++] = (char)('0' + whole % 10);
            whole /= 10;
        } while (whole);
        while (n)
            out[len++] = digits[--n];
    }
    if (fraction >= 0) {
        out[len++] = '.';
        out[len++] = (char)('0' + fraction / 100);
        out[len++] = (char)('0' + fraction / 10 % 10);
        out[len++] = (char)('0' + fraction % 10);
    }
    while (*unit)
        out[len++] = *unit++;
    out[len] = '\0';
    return len;
}

/* text.float_duration for a double. -1: no room. */
static int float_duration(char *out, size_t size, double ns) {
    int n;
    if (ns == 0)
        n = snprintf(out, size, "0 ns");
    else if (fabs(ns) >= 1e9)
        return grouped_fixed(out, size, ns / 1e9, " s");
    else if (fabs(ns) >= 1e6)
        n = snprintf(out, size, "%.3f ms", ns / 1e6);
    else if (fabs(ns) >= 1e3)
        n = snprintf(out, size, "%.3f us", ns / 1e3);
    else
        n = snprintf(out, size, "%.0f ns", ns);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

/* text.format_duration for an integer: its whole-nanosecond path, the float one for ties and
 * negatives (the int converted to a double first, as Python's int / float does). */
int duration(char *out, size_t size, long long ns) {
    if (ns == 0 && size > 4) {
        memcpy(out, "0 ns", 5);
        return 4;
    }
    if (ns > 0) {
        if (ns < 1000)
            return digits_unit(out, ns, -1, " ns");
        if (ns < 1000000)
            return digits_unit(out, ns / 1000, ns % 1000, " us");
        if (ns < 1000000000) {
            long long whole = ns / 1000, rest = ns % 1000;
            if (rest != 500) {
                whole += rest > 500;
                return digits_unit(out, whole / 1000, whole % 1000, " ms");
            }
        } else {
            long long whole = ns / 1000000, rest = ns % 1000000;
            if (rest != 500000) {
                whole += rest > 500000;
                int len = grouped(out, whole / 1000);
                return len + digits_unit(out + len, -1, whole % 1000, " s");
            }
        }
    }
    return float_duration(out, size, (double)ns);
}


/* Python divides the exact integers, rounding once, to the double d = V(1 + e), |e| <= 2^-53,
 * where V = 100 * part / whole; "%.Nf" then rounds d's exact value. Scaled by 10^N, V is
 * q + r / whole (num = 100 * 10^N * part = q * whole + r), and d's digits are V's rounded
 * unless a half lies between V and d: |V - (q + 1/2)| = |2r - whole| / (2 whole) at most V 2^-53,
 * that is |2r - whole| <= num 2^-52. Those (ties among them) are left to the caller. */
int share_digits(char *out, long long part, long long whole, int decimals) {
    if (part < 0 || part >= (1LL << 53) / 1000 || whole <= 0 || whole >= (1LL << 53) || decimals < 0 ||
        decimals > 1)
        return -1;
    unsigned long long num = (unsigned long long)part * (decimals ? 1000ULL : 100ULL);
    unsigned long long w = (unsigned long long)whole, q = num / w, twice = 2 * (num % w);
    unsigned long long gap = twice > w ? twice - w : w - twice;
    if (gap <= (num >> 52) + 1)
        return -1;
    q += twice > w;
    int len = grouped(out, decimals ? (long long)(q / 10) : (long long)q);
    if (len > 3) /* no separators in "%.Nf": only shares past 1,000% have them, which fall back */
        return -1;
    if (decimals) {
        out[len++] = '.';
        out[len++] = (char)('0' + q % 10);
    }
    out[len] = '\0';
    return len;
}
