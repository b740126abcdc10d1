/*
 * Files given with -f (submit's job file, apply's tenants file): JSON read
 * by jansson, YAML by libyaml's document loader, both into a jansson value.
 * YAML plain scalars follow the YAML 1.2 core schema (null, true/false,
 * decimal integers, floats); quoted scalars stay strings. Aliases are expanded; nesting is bounded.
 */
#include "cli.h"

#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define DEPTH_MAX 64

static json_t *plain_scalar(const char *s, size_t len)
{
    char *end;

    if (len == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
        !strcmp(s, "NULL"))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return json_false();
    if (strlen(s) == len && (s[0] == '-' || s[0] == '+' || (s[0] >= '0' && s[0] <= '9'))) {
        errno = 0;
        long long i = strtoll(s, &end, 10);
        if (!*end && !errno)
            return json_integer(i);
        errno = 0;
        double d = strtod(s, &end);
        if (!*end && !errno && isfinite(d) && strpbrk(s, "0123456789"))
            return json_real(d);
    } else if (s[0] == '.' && s[1] >= '0' && s[1] <= '9') {
        double d = strtod(s, &end);
        if (!*end && isfinite(d))
            return json_real(d);
    }
    return json_stringn(s, len);
}

/* Converts node n; NULL with a message in err on failure. */
static json_t *convert(yaml_document_t *doc, yaml_node_t *n, int depth, char *err, size_t errlen)
{
    json_t *out = NULL;

    if (!n) {
        allot_fmt(err, errlen, "broken document");
        return NULL;
    }
    if (depth > DEPTH_MAX) {
        allot_fmt(err, errlen, "line %zu: nested deeper than %d levels", n->start_mark.line + 1,
                  DEPTH_MAX);
        return NULL;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)n->data.scalar.value;
        size_t len = n->data.scalar.length;

        /* "\0" in a double-quoted scalar: jansson could hold it, but the
         * JSON reader refuses it, the YAML writer would cut the string
         * there, and the API refuses \u0000 (fuzz_cli_input) */
        if (strlen(s) != len) {
            allot_fmt(err, errlen, "line %zu: a string holds a NUL character",
                      n->start_mark.line + 1);
            return NULL;
        }
        /* libyaml's loader tags every untagged scalar !!str, so only the
         * style tells a plain scalar from a quoted one */
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            out = plain_scalar(s, len);
        else
            out = json_stringn(s, len);
        if (!out)
            allot_fmt(err, errlen, "line %zu: not valid UTF-8 or out of memory",
                      n->start_mark.line + 1);
        return out;
    }
    case YAML_SEQUENCE_NODE:
        out = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             out && it < n->data.sequence.items.top; it++) {
            json_t *v = convert(doc, yaml_document_get_node(doc, *it), depth + 1, err, errlen);
            if (!v || json_array_append_new(out, v) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    case YAML_MAPPING_NODE:
        out = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             out && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            json_t *v;

            if (!k || k->type != YAML_SCALAR_NODE ||
                strlen((const char *)k->data.scalar.value) != k->data.scalar.length) {
                allot_fmt(err, errlen, "line %zu: a key must be a plain string",
                          k ? k->start_mark.line + 1 : 0);
                json_decref(out);
                return NULL;
            }
            if (json_object_get(out, (const char *)k->data.scalar.value)) {
                allot_fmt(err, errlen, "line %zu: key \"%s\" given twice", k->start_mark.line + 1,
                          (const char *)k->data.scalar.value);
                json_decref(out);
                return NULL;
            }
            v = convert(doc, yaml_document_get_node(doc, p->value), depth + 1, err, errlen);
            if (!v || json_object_set_new(out, (const char *)k->data.scalar.value, v) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    default:
        allot_fmt(err, errlen, "empty document");
        return NULL;
    }
}

static json_t *load_yaml(FILE *f, const char *name)
{
    yaml_parser_t p;
    yaml_document_t doc;
    json_t *v = NULL;
    char err[512] = "";

    if (!yaml_parser_initialize(&p)) {
        cli_usage_error("%s: out of memory", name);
        return NULL;
    }
    yaml_parser_set_input_file(&p, f);
    if (!yaml_parser_load(&p, &doc)) {
        cli_usage_error("%s:%zu: %s", name, p.problem_mark.line + 1,
                        p.problem ? p.problem : "not valid YAML");
        yaml_parser_delete(&p);
        return NULL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        cli_usage_error("%s: the file is empty", name);
    else if (!(v = convert(&doc, root, 0, err, sizeof(err))))
        cli_usage_error("%s: %s", name, err);
    yaml_document_delete(&doc);
    /* one document per file: a second (after ---) would be ignored */
    if (v && !yaml_parser_load(&p, &doc)) {
        cli_usage_error("%s:%zu: %s", name, p.problem_mark.line + 1,
                        p.problem ? p.problem : "not valid YAML");
        json_decref(v);
        v = NULL;
    } else if (v) {
        root = yaml_document_get_root_node(&doc);
        /* a lone --- at the end is an empty document, and harmless */
        if (root && !(root->type == YAML_SCALAR_NODE && !root->data.scalar.length)) {
            cli_usage_error("%s:%zu: a second document (after ---): one document per file", name,
                            root->start_mark.line + 1);
            json_decref(v);
            v = NULL;
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&p);
    return v;
}

json_t *input_read(FILE *f, const char *name, bool json)
{
    json_t *v = NULL;
    int ch;

    /* peek at the first non-blank byte */
    while ((ch = getc(f)) == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
        ;
    if (ch == '{' || ch == '[')
        json = true;
    if (ch != EOF)
        ungetc(ch, f);
    if (json) {
        json_error_t je;

        v = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
        if (!v)
            cli_usage_error("%s:%d: %s", name, je.line, je.text);
    } else {
        v = load_yaml(f, name);
    }
    return v;
}

json_t *input_load(const char *path)
{
    bool stdin_ = !strcmp(path, "-");
    FILE *f = stdin_ ? stdin : fopen(path, "rb");
    size_t n = strlen(path);
    json_t *v;

    if (!f) {
        cli_usage_error("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    v = input_read(f, stdin_ ? "(stdin)" : path, n > 5 && !strcmp(path + n - 5, ".json"));
    if (!stdin_)
        fclose(f);
    return v;
}
