/* colibri - the server program: flags, config file, signals. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri.h"
#include "commit.h" /* COLIBRI_COMMIT, written at build time */

/* What the command line changes in a config, at start and at every reload. */
struct overrides {
    const char **listen;
    unsigned n_listen;
    const char *root;
    long threads;
};

static int apply_overrides(struct colibri_server *srv, void *arg, char *err, size_t errlen)
{
    const struct overrides *o = arg;
    int r;
    if (o->n_listen) {
        colibri_server_clear_listeners(srv);
        for (unsigned i = 0; i < o->n_listen; i++)
            if ((r = colibri_server_listen(srv, o->listen[i], err, errlen)) < 0)
                return r;
    }
    /* -r replaces whatever the config served at / */
    if (o->root && (colibri_server_remove_route(srv, "/"),
                    (r = colibri_serve_files(srv, "/", o->root, err, errlen)) < 0))
        return r;
    if (o->threads >= 0)
        colibri_server_set_threads(srv, (unsigned)o->threads);
    return 0;
}

/* nginx users type "-t" to test a config */
#define T_HINT " (worker threads; to check the config, as nginx -t does: --check-config)"

/* The version, the commit it was built from, and the optional features
 * compiled in. */
static void version(void)
{
    printf("colibri %s\ncommit %s\nfeatures:", COLIBRI_VERSION, COLIBRI_COMMIT);
#ifdef HAVE_BROTLI
    printf(" brotli");
#endif
#ifdef HAVE_ZSTD
    printf(" zstd");
#endif
    /* both always built: whether the kernel has them shows at start */
    printf(" seccomp landlock");
    printf(" http2 rewrite");
    const char *tls = colibri_tls_library();
    if (tls)
        printf(" tls\ntls: %s", tls);
    char libs[128];
    if (!colibri_libraries(libs, sizeof(libs)))
        printf("\nlibraries: %s", libs);
    printf("\n");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: colibri [-c FILE] [-l ADDR:PORT] [-r ROOT] [-t THREADS] [--check-config]\n"
               "               [--help] [--version]\n"
               "  -c, --config FILE     config file (default: ./colibri.conf if present)\n"
               "  -l, --listen ADDR:PORT listen here instead of the config's listeners\n"
               "                        (127.0.0.1:8080, [::1]:8080, *:8080); repeatable\n"
               "  -r, --root DIR        serve DIR at / (instead of the config's /)\n"
               "  -t, --threads N       worker threads (0: one per CPU)\n"
               "      --check-config    check the config as a start would, print 'FILE: ok'\n"
               "                        or every error, and exit (0: ok, 1: errors)\n"
               "  -h, --help            this text\n"
               "  -v, --version         print the version, the commit and the optional features\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"listen", required_argument, NULL, 'l'},
        {"root", required_argument, NULL, 'r'},   {"threads", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {"version", no_argument, NULL, 'v'},
        {"check-config", no_argument, NULL, 'C'}, {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *root = NULL, *listen[16];
    unsigned n_listen = 0;
    long threads = -1;
    bool check_only = false;
    int c;
    while ((c = getopt_long(argc, argv, ":c:l:r:t:hv", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config = optarg;
            break;
        case 'l':
            if (n_listen == sizeof(listen) / sizeof(listen[0])) {
                fprintf(stderr, "colibri: too many -l\n");
                return 2;
            }
            listen[n_listen++] = optarg;
            break;
        case 'r':
            root = optarg;
            break;
        case 't': {
            char *end;
            threads = strtol(optarg, &end, 10);
            if (*end || end == optarg || threads < 0 || threads > 1024) {
                fprintf(stderr, "colibri: -t wants a number from 0 to 1024%s\n", T_HINT);
                return 2;
            }
            break;
        }
        case ':': /* an option without its argument */
            if (optopt == 't')
                fprintf(stderr, "colibri: -t wants a number from 0 to 1024%s\n", T_HINT);
            else
                fprintf(stderr, "colibri: %s wants an argument\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        case 'C':
            check_only = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            version();
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "colibri: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    static char err[16384]; /* every error of a config, one per line */
    struct colibri_server *srv = colibri_server_new();
    if (!srv) {
        fprintf(stderr, "colibri: out of memory\n");
        return 1;
    }
    if (!config && access("colibri.conf", F_OK) == 0)
        config = "colibri.conf";
    if (config && colibri_server_load_config(srv, config, err, sizeof(err)) < 0)
        goto out_error;
    struct overrides ov = {
        .listen = listen, .n_listen = n_listen, .root = root, .threads = threads};
    if (apply_overrides(srv, &ov, err, sizeof(err)) < 0)
        goto out_error;
    colibri_server_on_reload(srv, apply_overrides, &ov);
    if (check_only) {
        if (!config) {
            snprintf(err, sizeof(err),
                     "no config file: colibri.conf is not here and -c names none");
            goto out_error;
        }
        printf("%s: ok\n", config);
        colibri_server_free(srv);
        return 0;
    }

    /* SIGTERM and SIGINT stop, SIGHUP reloads, SIGUSR1 reopens the logs:
     * the server's control thread reads them (no handler runs in the
     * middle of anything) */
    if (colibri_server_take_signals(srv, err, sizeof(err)) < 0 ||
        colibri_server_run(srv, err, sizeof(err)) < 0)
        goto out_error;
    colibri_server_free(srv);
    return 0;

out_error:
    /* one line per error, "FILE:LINE: KEY: message"; behind "colibri: "
     * when it stops a start */
    for (char *line = err, *nl; line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        fprintf(stderr, "%s%.*s\n",
                check_only ? "" : "colibri: ", nl ? (int)(nl - line) : (int)strlen(line), line);
    }
    colibri_server_free(srv);
    return 1;
}
