/*
 * The log sink of allotd (see log.h). Lines are written whole under one
 * lock so that lines of several threads never interleave.
 */
#include "log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_fp;   /* NULL: stderr */
static char *log_path; /* owned; NULL: stderr */
static bool log_json;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void log_sink(enum allot_log_level level, const char *subsys, const char *msg, void *ud)
{
    struct timespec ts;
    struct tm tm;
    char when[40];
    FILE *out;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t wl = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wl, sizeof(when) - wl, ".%03ldZ", ts.tv_nsec / 1000000);
    pthread_mutex_lock(&log_lock);
    out = log_fp ? log_fp : stderr;
    if (log_json) {
        json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "time", when, "level", level_names[level],
                              "subsys", subsys, "msg", msg);
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

        if (s)
            fprintf(out, "%s\n", s);
        free(s);
        json_decref(o);
    } else {
        fprintf(out, "%s %s %s: %s\n", when, level_names[level], subsys, msg);
    }
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}

int log_setup(const char *path, bool json, const char *level)
{
    enum allot_log_level max = ALLOT_LOG_INFO;

    for (int i = 0; i < 4; i++)
        if (level && !strcmp(level, level_names[i]))
            max = (enum allot_log_level)i;
    log_json = json;
    if (path && *path) {
        log_path = allot_strdup(path);
        if (!log_path || log_reopen() < 0)
            return ALLOT_EIO;
    }
    allot_log_set(log_sink, NULL, max);
    return 0;
}

int log_reopen(void)
{
    FILE *fp;

    if (!log_path)
        return 0;
    fp = fopen(log_path, "a");
    if (!fp)
        return ALLOT_EIO;
    pthread_mutex_lock(&log_lock);
    if (log_fp)
        fclose(log_fp);
    log_fp = fp;
    pthread_mutex_unlock(&log_lock);
    return 0;
}

void log_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_fp)
        fclose(log_fp);
    log_fp = NULL;
    pthread_mutex_unlock(&log_lock);
    allot_free(log_path);
    log_path = NULL;
}

void log_http_lib(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    char *html;

    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if ((html = strstr(msg, " ('<")) != NULL) /* "(HTTP response code is 400 ('<html>...'))" */
        allot_strlcpy(html, ")", sizeof(msg) - (size_t)(html - msg));
    msg[strcspn(msg, "\n")] = '\0';
    LOG_WARN("http", "%s", msg);
}
