/*
 * The web dashboard's files: GET /ui and /ui/... are served from the
 * ui-dir folder (web/ in the source tree, DATADIR/allot/web installed).
 * Only regular files directly reachable by their path are served: no
 * directory listings, no "..", no dot files, nothing over UI_FILE_MAX.
 * The files are public (they hold no data); every API call the pages make
 * carries the user's bearer token like any other client.
 */
#include "server.h"
#include "ui.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UI_FILE_MAX (8 << 20)

bool ui_path(const char *path)
{
    return !strcmp(path, "/ui") || !strncmp(path, "/ui/", 4);
}

static const char *mime_of(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(name, '.');

    for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
        if (!strcmp(dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

/* True when every segment of rel is a plain name (no "", ".", "..", dot
 * files) of safe characters. */
static bool rel_ok(const char *rel)
{
    if (!*rel || strlen(rel) > 200)
        return false;
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);

        if (n == 0 || p[0] == '.')
            return false;
        for (size_t i = 0; i < n; i++) {
            char c = p[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.'))
                return false;
        }
        p += n + (e ? 1 : 0);
        if (e && !*p)
            return false;
    }
    return true;
}

/* Whether an If-None-Match header value names entity tag `tag` (a list
 * of tags, weak ones too, or "*"). */
static bool none_match(const char *hdr, const char *tag)
{
    size_t n = strlen(tag);

    for (const char *p = hdr; p && *p;) {
        p += strspn(p, " \t,");
        if (*p == '*')
            return true;
        if (!strncmp(p, "W/", 2))
            p += 2;
        if (!strncmp(p, tag, n) && (p[n] == '\0' || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
            return true;
        p = strchr(p, ',');
    }
    return false;
}

int ui_serve(struct req *r)
{
    const char *dir = r->srv->cfg.ui_dir;
    const char *rel = r->path[3] == '/' ? r->path + 4 : "";
    char file[4400];
    struct stat sb;
    char *buf;
    int fd;

    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
        return api_error(r, 405, "method_not_allowed", "%s is not allowed on %s", r->method,
                         r->path);
    if (!strcmp(r->path, "/ui")) {
        api_set_header(r, "Location", "/ui/");
        return api_text(r, 308, "text/plain; charset=utf-8", "see /ui/\n");
    }
    if (!*rel)
        rel = "index.html";
    if (!dir || !*dir)
        return api_error(r, 404, "not_found", "the dashboard is not installed (ui-dir is empty)");
    if (!rel_ok(rel))
        return api_error(r, 404, "not_found", "no such file: %s", r->path);
    allot_fmt(file, sizeof(file), "%s/%s", dir, rel);
    fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)))
        return api_error(r, 404, "not_found",
                         "the dashboard is not installed on this allotd (its --ui-dir has no "
                         "files; allotd's log names the folder)");
    if (fd < 0)
        return api_error(r, 404, "not_found", "no such file: %s", r->path);
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > UI_FILE_MAX) {
        close(fd);
        return api_error(r, 404, "not_found", "no such file: %s", r->path);
    }
    buf = allot_malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf || got != (size_t)sb.st_size) {
        allot_free(buf);
        return api_error(r, 500, "internal", "cannot read %s", r->path);
    }
    /* every page load asks again (no-cache), and a file that did not
     * change is answered 304 without its bytes */
    char tag[24];
    const char *inm = api_header(r, "If-None-Match");
    allot_fmt(tag, sizeof(tag), "\"%016llx\"",
              (unsigned long long)allot_fnv1a(ALLOT_FNV1A_INIT, buf, got));
    api_set_header(r, "ETag", tag);
    api_set_header(r, "Cache-Control", "no-cache");
    /* the dashboard's own files only, in no other site's frame; types as
     * given (its pages hold a token) */
    api_set_header(r, "X-Content-Type-Options", "nosniff");
    api_set_header(r, "X-Frame-Options", "DENY");
    api_set_header(r, "Referrer-Policy", "no-referrer");
    api_set_header(r, "Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                   "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
    bool same = inm && none_match(inm, tag);
    api_bytes(r, same ? 304 : 200, mime_of(rel), buf, same ? 0 : got);
    allot_free(buf);
    return 0;
}
