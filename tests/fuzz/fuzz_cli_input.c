/*
 * Fuzz target: what `allot` reads from the user beyond its flags' names.
 * The whole input is a job or tenants file for `-f` (input_read: JSON when
 * it starts with { or [, else YAML through libyaml); its first line (up
 * to 64 bytes) is also an option value for the strict number parsers of
 * args.c: sizes ("16Gi"), durations ("90m"), integers and numbers, and
 * a host list (allot_hostlist_expand: -w/-x).
 * Invariants: a file that loads is a value jansson can write; the YAML the
 * CLI prints for it (`-o yaml`) reads back as the same value, as output.c
 * promises; a parsed option value lies in the range its parser documents.
 * The parsers print their errors to stderr (run libFuzzer with
 * -close_fd_mask=2 to keep the log short).
 */
#include "fuzz.h"

#include "cli.h"

#include "allot/common.h"

#include <math.h>
#include <string.h>

/* -o yaml output of v read back with input_read equals v. */
static void check_yaml_round_trip(json_t *v)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    json_t *back;

    if (!f)
        return;
    out_yaml(f, v);
    fclose(f);
    f = fmemopen(text, len, "rb");
    if (!f) {
        free(text);
        return;
    }
    back = input_read(f, "fuzz -o yaml", false);
    fclose(f);
    if (!back || !json_equal(v, back))
        fprintf(stderr, "-o yaml wrote:\n%s\n", text);
    FUZZ_CHECK(back != NULL);
    FUZZ_CHECK(json_equal(v, back));
    json_decref(back);
    free(text);
}

static void check_options(const char *s)
{
    int64_t i = -1;
    double d = -1;

    if (args_mib("fuzz", s, &i) == CLI_OK)
        FUZZ_CHECK(i >= 0 && i <= INT64_C(1) << 40);
    if (args_seconds("fuzz", s, &i) == CLI_OK)
        FUZZ_CHECK(i >= 0 && i <= INT64_C(1) << 40);
    if (args_int("fuzz", s, 1, 1024, &i) == CLI_OK)
        FUZZ_CHECK(i >= 1 && i <= 1024);
    if (args_num("fuzz", s, 0, 65536, &d) == CLI_OK)
        FUZZ_CHECK(isfinite(d) && d >= 0 && d <= 65536);
    /* a host list (-w, -x): 1..ALLOT_HOSTLIST_MAX distinct node names */
    char **names = NULL, err[256];
    int n = -1;
    if (allot_hostlist_expand(s, &names, &n, err, sizeof(err)) == 0) {
        FUZZ_CHECK(n >= 1 && n <= ALLOT_HOSTLIST_MAX);
        for (int k = 0; k < n; k++)
            FUZZ_CHECK(allot_node_name_ok(names[k]));
        for (int k = 1; k < n && k < 64; k++)
            FUZZ_CHECK(strcmp(names[k - 1], names[k]) != 0);
        /* the short form allot show prints expands to the same names */
        size_t need = allot_hostlist_compress((const char *const *)names, n, NULL, 0);
        char *short_form = malloc(need + 1), **back = NULL;
        int m = 0;
        if (short_form) {
            allot_hostlist_compress((const char *const *)names, n, short_form, need + 1);
            FUZZ_CHECK(allot_hostlist_expand(short_form, &back, &m, err, sizeof(err)) == 0);
            FUZZ_CHECK(m == n);
            for (int k = 0; k < m && k < n; k++)
                FUZZ_CHECK(strcmp(back[k], names[k]) == 0);
            allot_hostlist_free(back, m);
            free(short_form);
        }
        allot_hostlist_free(names, n);
    } else {
        FUZZ_CHECK(names == NULL && n == 0 && err[0]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char opt[65];
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    FILE *f;
    json_t *v;

    if (n >= sizeof(opt))
        n = sizeof(opt) - 1;
    memcpy(opt, data, n);
    opt[n] = '\0';
    check_options(opt);

    /* fmemopen wants a size > 0; an empty file reads like a blank one */
    f = size ? fmemopen((void *)data, size, "rb") : fmemopen(" ", 1, "rb");
    if (!f)
        return 0;
    v = input_read(f, "fuzz", false);
    fclose(f);
    if (v) {
        char *text = json_dumps(v, JSON_ENCODE_ANY);

        FUZZ_CHECK(text != NULL);
        free(text);
        check_yaml_round_trip(v);
    }
    json_decref(v);
    return 0;
}
