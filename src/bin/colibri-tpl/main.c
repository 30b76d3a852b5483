/* colibri-tpl TEMPLATE [DATA.json] - render a Mustache template to stdout.
 *
 * The data (JSON, any value; {} when absent) are rendered with the dynamic
 * binding. {{>name}} loads "name", else "name.mustache", from the template's
 * directory; a partial that is not there renders as nothing. Errors go to
 * stderr and the exit status is 1. External checks run the official
 * Mustache spec through this command line: keep it stable.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/strbuf.h"
#include "tpl/tpl.h"

/* jansson limits the nesting of what it parses, which bounds this recursion. */
static struct tpl_value *from_json(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        struct tpl_value *obj = tpl_value_object();
        const char *key;
        json_t *member;
        json_object_foreach((json_t *)j, key, member)
        {
            if (!obj || tpl_object_set(obj, key, strlen(key), from_json(member)) < 0) {
                tpl_value_free(obj);
                return NULL;
            }
        }
        return obj;
    }
    case JSON_ARRAY: {
        struct tpl_value *list = tpl_value_list();
        size_t i;
        json_t *item;
        json_array_foreach(j, i, item)
        {
            if (!list || tpl_list_push(list, from_json(item)) < 0) {
                tpl_value_free(list);
                return NULL;
            }
        }
        return list;
    }
    case JSON_STRING:
        return tpl_value_string(json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return tpl_value_int(json_integer_value(j));
    case JSON_REAL:
        return tpl_value_double(json_real_value(j));
    case JSON_TRUE:
        return tpl_value_bool(true);
    case JSON_FALSE:
        return tpl_value_bool(false);
    default:
        return tpl_value_null();
    }
}

/* The file is opened here rather than by json_load_file(), so that a file
 * that cannot be read is reported with its errno, not as a JSON error at
 * line -1 (a directory even opens, and reads as an empty document). */
static json_t *parse_file(const char *path)
{
    json_t *j = NULL;
    json_error_t jerr;
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "colibri-tpl: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    int e = fstat(fileno(f), &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        fprintf(stderr, "colibri-tpl: %s: %s\n", path, strerror(e));
        goto out_close;
    }
    j = json_loadf(f, JSON_DECODE_ANY, &jerr);
    if (j)
        goto out_close;
    /* jansson counts lines and columns from 1; 0 is before the first byte */
    if (ferror(f))
        fprintf(stderr, "colibri-tpl: %s: read error\n", path);
    else if (jerr.line > 0 && jerr.column > 0)
        fprintf(stderr, "colibri-tpl: %s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
    else if (jerr.line > 0)
        fprintf(stderr, "colibri-tpl: %s:%d: %s\n", path, jerr.line, jerr.text);
    else
        fprintf(stderr, "colibri-tpl: %s: %s\n", path, jerr.text);
out_close:
    fclose(f);
    return j;
}

static struct tpl_value *load_data(const char *path)
{
    if (!path)
        return tpl_value_object();
    json_t *j = parse_file(path);
    if (!j)
        return NULL;
    struct tpl_value *v = from_json(j);
    json_decref(j);
    if (!v)
        fprintf(stderr, "colibri-tpl: out of memory\n");
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: colibri-tpl TEMPLATE [DATA.json]\n");
        return 1;
    }
    char err[512];
    int status = 1;
    struct strbuf out = {0};
    struct tpl_value *data = load_data(argc == 3 ? argv[2] : NULL);
    if (!data)
        return 1;
    struct tpl *t = tpl_compile_file(argv[1], NULL, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "colibri-tpl: %s\n", err);
        goto out_free_data;
    }
    if (tpl_render_value(t, data, &out, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "colibri-tpl: %s\n", err);
        goto out_free_tpl;
    }
    if (fwrite(out.buf, 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
        perror("colibri-tpl: stdout");
        goto out_free_tpl;
    }
    status = 0;
out_free_tpl:
    tpl_free(t);
    strbuf_free(&out);
out_free_data:
    tpl_value_free(data);
    return status;
}
