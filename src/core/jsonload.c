/*
 * jansson with allot's allocator (see jsonload.h). Process-wide allocator
 * switch done once under pthread_once; the failure flag is per thread.
 */
#include "jsonload.h"

#include "allot/common.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;

/* Set when one of jansson's allocations failed on this thread: jansson does
 * not always report it. */
static _Thread_local bool alloc_failed;

static void *json_alloc(size_t n)
{
    void *p = allot_malloc(n);

    if (!p)
        alloc_failed = true;
    return p;
}

static void json_release(void *p)
{
    allot_free(p);
}

static void install_once(void)
{
    json_set_alloc_funcs(json_alloc, json_release);
}

void allot_json_use_allot_alloc(void)
{
    pthread_once(&alloc_once, install_once);
}

void allot_json_alloc_reset(void)
{
    alloc_failed = false;
}

bool allot_json_alloc_failed(void)
{
    return alloc_failed;
}

json_t *allot_json_loadb(const char *buf, size_t len, json_error_t *jerr, bool *oom)
{
    json_t *root;

    allot_json_use_allot_alloc();
    alloc_failed = false;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, jerr);
    if (!root) {
        *oom = alloc_failed || json_error_code(jerr) == json_error_out_of_memory;
        return NULL;
    }
    if (alloc_failed) {
        json_decref(root);
        *oom = true;
        return NULL;
    }
    *oom = false;
    return root;
}

int allot_json_verrf(char *err, size_t errlen, const char *where, const char *fmt, va_list ap)
{
    char msg[768];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (err && errlen > 0) {
        if (where && where[0])
            allot_fmt(err, errlen, "%s: %s", where, msg);
        else
            allot_strlcpy(err, msg, errlen);
    }
    return ALLOT_EINVAL;
}

const char *allot_json_unknown_key(json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *val;

    json_object_foreach(obj, key, val)
    {
        const char *const *a = allowed;

        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a)
            return key;
    }
    return NULL;
}
