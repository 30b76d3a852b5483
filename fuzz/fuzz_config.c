/* Fuzz target for the config parser: any bytes either parse into a tree
 * every reader can walk and convert, or fail with a "file:line:" message. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static void check_message(const char *err)
{
    /* every failure names where it happened */
    if (strncmp(err, "fuzz.conf:", 10) != 0)
        abort();
}

/* Takes every node the way modules do, and runs every converter on every
 * value; the results do not matter, only that nothing misbehaves. */
static void walk(struct config_node *section, int depth)
{
    char err[256];
    if (depth > 33)
        abort(); /* deeper than the parser allows */
    for (struct config_node *n = config_take_any(section); n; n = config_take_any(section)) {
        if (!n->used || !n->name || !n->value || !n->file)
            abort();
        uint64_t u;
        bool b;
        long l;
        if (config_duration_ms(n, &u, err, sizeof(err)) < 0)
            check_message(err);
        if (config_size(n, &u, err, sizeof(err)) < 0)
            check_message(err);
        if (config_bool(n, &b, err, sizeof(err)) < 0)
            check_message(err);
        if (config_int(n, -1000, 1000, &l, err, sizeof(err)) < 0)
            check_message(err);
        else if (l < -1000 || l > 1000)
            abort();
        if (n->is_section)
            walk(n, depth + 1);
        else if (n->children)
            abort();
    }
}

static void run(struct config *cfg)
{
    char err[256];
    if (!cfg)
        return;
    /* a fresh tree has unused nodes exactly when it is not empty */
    int r = config_check_unused(cfg, err, sizeof(err));
    if ((r == 0) != (cfg->root->children == NULL))
        abort();
    if (r < 0)
        check_message(err);
    /* a reader that wants the first key once takes its first copy; any
     * other copy is then reported as a duplicate */
    struct config_node *first = cfg->root->children;
    if (first) {
        if (config_take(cfg->root, first->name) != first)
            abort();
        if (config_check_unused(cfg, err, sizeof(err)) < 0)
            check_message(err);
        if (first->is_section)
            walk(first, 1);
    }
    walk(cfg->root, 0);
    if (config_check_unused(cfg, err, sizeof(err)) != 0)
        abort();
    config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    /* a variable that is set, so inputs can reach the expansion path too */
    setenv("FUZZ_VAR", "value # with \"quotes\" ${X}", 1);

    /* exactly size bytes, no terminator: ASan catches any over-read */
    err[0] = '\0';
    struct config *cfg =
        config_parse_buffer("fuzz.conf", (const char *)data, size, err, sizeof(err));
    if (!cfg)
        check_message(err);
    run(cfg);

    /* and the C-string entry point, which stops at the first NUL */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    err[0] = '\0';
    cfg = config_parse_string("fuzz.conf", text, err, sizeof(err));
    if (!cfg)
        check_message(err);
    run(cfg);
    free(text);
    return 0;
}
