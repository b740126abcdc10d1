/*
 * Structured logging of allotd: the sink behind allot_log_set() that
 * writes one line per message, as text ("TIME LEVEL subsys: message") or
 * as a JSON object per line, to stderr or to a log file that SIGHUP
 * reopens (log_reopen). The sink serialises writers with its own lock.
 */
#ifndef ALLOT_SERVER_LOG_H
#define ALLOT_SERVER_LOG_H

#include "allot/common.h"

#include <stdarg.h>
#include <stdbool.h>

#define LOG_ERROR(sub, ...) ALLOT_LOG(ALLOT_LOG_ERROR, sub, __VA_ARGS__)
#define LOG_WARN(sub, ...)  ALLOT_LOG(ALLOT_LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...)  ALLOT_LOG(ALLOT_LOG_INFO, sub, __VA_ARGS__)
#define LOG_DEBUG(sub, ...) ALLOT_LOG(ALLOT_LOG_DEBUG, sub, __VA_ARGS__)

/* Installs the sink: `path` NULL or "" logs to stderr; json selects JSON
 * lines; level is "error", "warn", "info" or "debug". Returns 0 or
 * ALLOT_EIO when the file cannot be opened. */
int log_setup(const char *path, bool json, const char *level);
/* Reopens the log file (after rotation). Returns 0 or ALLOT_EIO. */
int log_reopen(void);
/* Closes the file. */
void log_close(void);
/* libmicrohttpd's message logger (MHD_OPTION_EXTERNAL_LOGGER, the first
 * option; cls unused): its messages (a request it could not parse, a TLS
 * client on a plain port, the connection limit) go to this log as
 * warnings of subsystem "http", without the HTML page it answers with. */
void log_http_lib(void *cls, const char *fmt, va_list ap);

#endif
