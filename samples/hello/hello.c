/* samples/hello - a program built against the installed libcolibri alone:
 *
 *     cc -o hello hello.c $(pkg-config --cflags --libs colibri)
 *     ./hello 127.0.0.1:8080
 *
 * It answers /greet?who=NAME with a greeting and /time with the time, and
 * stops cleanly on Ctrl-C. */
#include <colibri.h>
#include <stdio.h>
#include <time.h>

static int greet(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    const char *greeting = data;
    struct colibri_str who;
    if (!colibri_req_query(req, "who", &who))
        who = (struct colibri_str){.p = "stranger", .len = 8};
    colibri_resp_printf(resp, "%s, %.*s!\n", greeting, (int)who.len, who.p);
    return 200;
}

static int now(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    colibri_resp_set_type(resp, "application/json");
    colibri_resp_printf(resp, "{\"time\": %lld}\n", (long long)time(NULL));
    return 200;
}

int main(int argc, char **argv)
{
    char err[256] = "";
    static const struct colibri_handler handlers[] = {
        {.name = "greet", .fn = greet},
        {.name = "time", .fn = now},
    };
    struct colibri_server *server = colibri_server_new();
    if (!server)
        return 1;
    for (unsigned i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        colibri_server_register(server, &handlers[i]);
    if (colibri_server_listen(server, argc > 1 ? argv[1] : "127.0.0.1:8080", err, sizeof(err)) ||
        colibri_server_route(server, "/greet", "greet", "Hello", err, sizeof(err)) ||
        colibri_server_route(server, "/time", "time", NULL, err, sizeof(err))) {
        fprintf(stderr, "hello: %s\n", err);
        return 1;
    }
    /* SIGINT and SIGTERM: a graceful stop, read by the server's control
     * thread (no handler) */
    int r = colibri_server_take_signals(server, err, sizeof(err));
    if (!r)
        r = colibri_server_run(server, err, sizeof(err));
    if (r)
        fprintf(stderr, "hello: %s\n", err);
    colibri_server_free(server);
    return r ? 1 : 0;
}
