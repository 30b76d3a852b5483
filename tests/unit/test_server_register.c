/* test_server_register.c - handlers registered after routes were added
 * leave those routes intact (registering once moved every handler). */
#include <stdio.h>

#include "colibri.h"
#include "http/http.h"
#include "route/trie.h"
#include "server/server.h"
#include "test.h"

static int answer(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)resp;
    (void)data;
    return 204;
}

TEST(route_then_register_many)
{
    static char names[40][16];
    struct colibri_handler h = {.name = "first", .fn = answer, .methods = COLIBRI_M(COLIBRI_PUT)};
    char err[256];
    struct colibri_server *srv = colibri_server_new();
    CHECK(srv != NULL);
    CHECK_EQ_INT(colibri_server_register(srv, &h), 0);
    CHECK_EQ_INT(colibri_server_route(srv, "/first", "first", NULL, err, sizeof(err)), 0);
    /* each one routed as it comes, as a program does */
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "h%d", i);
        struct colibri_handler more = {.name = names[i], .fn = answer};
        char prefix[24];
        snprintf(prefix, sizeof(prefix), "/%s", names[i]);
        CHECK_EQ_INT(colibri_server_register(srv, &more), 0);
        CHECK_EQ_INT(colibri_server_route(srv, prefix, names[i], NULL, err, sizeof(err)), 0);
    }
    size_t matched;
    const struct http_route *r = trie_lookup_segments(srv->routes, "/first", 6, &matched);
    CHECK(r != NULL);
    CHECK(r && r->handler == server_find_handler(srv, "first"));
    if (r) { /* read through the route's pointer: ASan sees a stale one */
        CHECK_EQ_STR(r->handler->name, "first");
        CHECK(r->handler->fn == answer);
        CHECK_EQ_INT(r->handler->methods, COLIBRI_M(COLIBRI_PUT));
    }
    r = trie_lookup_segments(srv->routes, "/h0", 3, &matched);
    CHECK(r && r->handler == server_find_handler(srv, "h0"));
    colibri_server_free(srv);
}

int main(void)
{
    RUN(route_then_register_many);
    return test_summary();
}
