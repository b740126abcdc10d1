/*
 * Fuzz target: the region reader (src/shim/region_reader.c), which the
 * agent runs on a file the job can write anything into. The input edits a
 * valid, initialised region: its first byte picks the file's length (0:
 * the region's size; 1: empty; 2: cut short by the next two bytes; 3: one
 * byte more), then records of [offset: 4 bytes][length: 1 byte][bytes]
 * overwrite the file at offset (modulo its size). The file is written and
 * read back with allot_shim_region_read. Invariants: the answer is 0,
 * ALLOT_EINVAL or ALLOT_EIO, never a crash; on 0 at most 128 processes,
 * each a live slot (pid > 0) of a distinct index below 128, the job's
 * totals no less than any process's (sums saturate), the peaks no less
 * than what is held now; a refusal leaves the output zeroed.
 */
#include "../fuzz/fuzz.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "allot/common.h"
#include "allot/shim_region.h"
#include "region_layout.h"

static unsigned char file[sizeof(struct shim_region_hdr) + 1];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct allot_shim_usage u;
    char path[] = "/tmp/allot-fuzz-region-XXXXXX";
    struct shim_region_hdr *h = (struct shim_region_hdr *)file;
    size_t len = sizeof(*h), at = 1;
    bool seen[ALLOT_SHIM_MAX_PROC] = {false};
    int fd, rc;

    memset(file, 0, sizeof(file));
    h->magic = SHIM_REGION_MAGIC;
    h->version = SHIM_REGION_VERSION;
    h->size = sizeof(*h);
    h->max_dev = SHIM_MAX_DEV;
    h->max_proc = SHIM_MAX_PROC;
    if (size > 0) {
        switch (data[0] & 3) {
        case 1:
            len = 0;
            break;
        case 2:
            len = size >= 3 ? ((size_t)data[1] << 8 | data[2]) % sizeof(*h) : 0;
            at = 3;
            break;
        case 3:
            len = sizeof(*h) + 1;
            break;
        default:
            break;
        }
    }
    while (at + 5 <= size) {
        uint32_t off;
        size_t n = data[at + 4];

        memcpy(&off, data + at, 4);
        at += 5;
        off %= (uint32_t)sizeof(*h);
        if (n > size - at)
            n = size - at;
        if (n > sizeof(*h) - off)
            n = sizeof(*h) - off;
        memcpy(file + off, data + at, n);
        at += n;
    }
    fd = mkstemp(path);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, file, len) == (ssize_t)len);
    close(fd);
    rc = allot_shim_region_read(path, &u);
    unlink(path);
    FUZZ_CHECK(rc == 0 || rc == ALLOT_EINVAL || rc == ALLOT_EIO);
    if (rc) {
        FUZZ_CHECK(u.n_procs == 0 && u.launches == 0 && u.used[0] == 0);
        return 0;
    }
    FUZZ_CHECK(u.n_procs >= 0 && u.n_procs <= ALLOT_SHIM_MAX_PROC);
    for (int i = 0; i < u.n_procs; i++) {
        const struct allot_shim_proc *p = &u.procs[i];

        FUZZ_CHECK(p->slot >= 0 && p->slot < ALLOT_SHIM_MAX_PROC && !seen[p->slot]);
        seen[p->slot] = true;
        FUZZ_CHECK(p->pid > 0);
        FUZZ_CHECK(u.launches >= p->launches && u.busy_ns >= p->busy_ns);
        for (int d = 0; d < ALLOT_SHIM_MAX_DEV; d++)
            FUZZ_CHECK(u.used[d] >= p->used[d] && u.over[d] >= p->over[d]);
    }
    for (int d = 0; d < ALLOT_SHIM_MAX_DEV; d++)
        FUZZ_CHECK(u.peak[d] >= u.used[d]);
    return 0;
}
