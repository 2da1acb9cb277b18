/* Drives the native exporter over recordings named on the command line, for the sanitizer test:
 * built with -fsanitize=address,undefined and linked with -Wl,--wrap=mmap,--wrap=munmap, so the
 * file the exporter maps is a heap copy of exactly its size and a read past it is reported.
 * Each file goes through every writer and statistics mode; the exit status is 0 unless a
 * sanitizer stopped the run. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void* autonvtx_export_new(const char* json_path, const char* pftrace_path, int stats_mode, uint64_t skip_first);
int autonvtx_export_file(void* handle, const char* path, uint64_t group, uint64_t info[8]);
uint64_t autonvtx_export_damage(void* handle, uint64_t out[6]);
size_t autonvtx_export_rows(void* handle);
void autonvtx_export_row(void* handle, size_t i, uint64_t out[12], double fout[3]);
const char* autonvtx_export_text(void* handle, uint32_t id, int which);
size_t autonvtx_export_group_spans(void* handle, size_t i, uint64_t out[3]);
void autonvtx_export_free(void* handle);

void* __real_mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset);
int __real_munmap(void* addr, size_t length);

void* __wrap_mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    char* copy = malloc(length ? length : 1);
    size_t done = 0;
    (void)addr, (void)prot, (void)flags;
    if (!copy)
        return MAP_FAILED;
    while (done < length) {
        ssize_t n = pread(fd, copy + done, length - done, offset + (off_t)done);
        if (n <= 0) {
            free(copy);
            return MAP_FAILED;
        }
        done += (size_t)n;
    }
    return copy;
}

int __wrap_munmap(void* addr, size_t length)
{
    (void)length;
    free(addr);
    return 0;
}

static void one(const char* path, int mode, uint64_t skip_first)
{
    uint64_t info[8], out[12], span[3], damage[6];
    double fout[3];
    size_t i, rows;
    void* x = autonvtx_export_new("/dev/null", NULL, mode, skip_first);
    void* p = autonvtx_export_new(NULL, "/dev/null", 0, 0);
    int rc = autonvtx_export_file(x, path, 7, info);
    autonvtx_export_file(p, path, 0, NULL);
    autonvtx_export_damage(x, damage);
    rows = autonvtx_export_rows(x);
    for (i = 0; i < rows; ++i) {
        autonvtx_export_row(x, i, out, fout);
        autonvtx_export_text(x, (uint32_t)out[9], 0);
        autonvtx_export_text(x, (uint32_t)out[10], 1);
    }
    for (i = 0; i < autonvtx_export_group_spans(x, 0, span); ++i)
        autonvtx_export_group_spans(x, i, span);
    printf("%s mode %d: rc %d, %llu ranges, %zu rows, damage %llu/%llu/%llu\n", path, mode, rc,
           (unsigned long long)info[0], rows, (unsigned long long)damage[0], (unsigned long long)damage[1],
           (unsigned long long)damage[2]);
    autonvtx_export_free(x);
    autonvtx_export_free(p);
}

int main(int argc, char** argv)
{
    int i;
    for (i = 1; i < argc; ++i) {
        one(argv[i], 1, 0);         /* flat */
        one(argv[i], 2 | 8, 1);     /* tree, classes, warm-up left out */
        one(argv[i], 1 | 4 | 8, 2); /* by thread */
    }
    return 0;
}
