/*
 * Fuzz target: the shim's environment (env.c). The input's first line is
 * parsed as a size by shim_parse_size; then each line in turn becomes
 * ALLOT_GPU_MEMORY_LIMIT (line 0) or ALLOT_GPU_MEMORY_LIMIT_<i> (line i)
 * for shim_config_load. Invariants: a size is accepted exactly when it is
 * digits plus one known suffix and fits 64 bits, with the value an
 * independent 128-bit computation gives; the configuration caps exactly
 * the devices that were given a value, at the value's size, or at 0 with
 * bad_env set when a value does not parse.
 */
#include "../fuzz/fuzz.h"

#include <string.h>

#include "shim.h"

/* The reference: digits, then a suffix from the documented list. */
static bool ref_parse(const char *s, uint64_t *out)
{
    static const char *const suffix[] = {"", "K", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"};
    static const unsigned __int128 mult[] = {
        1,          1000,       1000000,    1000000000, 1000000000000ull,
        1ull << 10, 1ull << 20, 1ull << 30, 1ull << 40};
    unsigned __int128 v = 0;
    size_t n = 0;

    while (s[n] >= '0' && s[n] <= '9') {
        v = v * 10 + (unsigned)(s[n] - '0');
        if (v > UINT64_MAX)
            return false;
        n++;
    }
    if (!n)
        return false;
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        if (!strcmp(s + n, suffix[i])) {
            v *= mult[i];
            if (v > UINT64_MAX)
                return false;
            *out = (uint64_t)v;
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[512], *line, *save = NULL;
    uint64_t a = 0, b = 0;
    struct shim_config c;
    bool given[SHIM_MAX_DEV + 1] = {false}, bad = false;
    uint64_t want[SHIM_MAX_DEV + 1] = {0};
    int i = 0;

    if (size >= sizeof(buf))
        size = sizeof(buf) - 1;
    memcpy(buf, data, size);
    buf[size] = '\0';
    /* the first line as a size */
    {
        char first[512];
        size_t n = strcspn(buf, "\n");
        bool ok, rok;

        memcpy(first, buf, n);
        first[n] = '\0';
        ok = shim_parse_size(first, &a);
        rok = ref_parse(first, &b);
        FUZZ_CHECK(ok == rok);
        FUZZ_CHECK(!ok || a == b);
    }
    /* the lines as the environment */
    unsetenv("ALLOT_GPU_MEMORY_LIMIT");
    for (int d = 0; d < SHIM_MAX_DEV; d++) {
        char name[40];

        snprintf(name, sizeof(name), "ALLOT_GPU_MEMORY_LIMIT_%d", d);
        unsetenv(name);
    }
    for (line = strtok_r(buf, "\n", &save); line && i <= SHIM_MAX_DEV;
         line = strtok_r(NULL, "\n", &save), i++) {
        char name[40];
        uint64_t v = 0;

        if (i == 0)
            snprintf(name, sizeof(name), "ALLOT_GPU_MEMORY_LIMIT");
        else
            snprintf(name, sizeof(name), "ALLOT_GPU_MEMORY_LIMIT_%d", i - 1);
        setenv(name, line, 1);
        given[i] = true;
        if (ref_parse(line, &v))
            want[i] = v;
        else
            bad = true;
    }
    shim_config_load(&c);
    FUZZ_CHECK(c.bad_env == bad);
    for (int d = 0; d < SHIM_MAX_DEV; d++) {
        bool lim = given[d + 1] || given[0];
        uint64_t v = given[d + 1] ? want[d + 1] : want[0];

        FUZZ_CHECK(c.limited[d] == lim);
        FUZZ_CHECK(!lim || c.limit[d] == v);
    }
    FUZZ_CHECK(c.any_limit == (i > 0));
    return 0;
}
