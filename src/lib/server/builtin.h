/* builtin.h - how a handler or module built into the library announces
 * itself, in its own file and nowhere else:
 *
 *     BUILTIN_MODULE(redirect) = {.name = "redirect", .from_config = from_config};
 *
 * cmake/gen-builtins.cmake finds every such line under src/lib and lists
 * it in gen/builtins.h, which colibri_server_new() registers: a new module
 * touches no other file. */
#pragma once

#include "colibri.h"

#define BUILTIN_MODULE(id)  const struct colibri_module builtin_module_##id
#define BUILTIN_HANDLER(id) const struct colibri_handler builtin_handler_##id

/* Objects a module shares between its routes for the life of the server's
 * config generation (a gateway's upstream groups: their pools and health),
 * kept under (kind, name) and freed (free_fn) after the routes, at a
 * reload when the generation retires. live_fn (or NULL) runs once when the
 * generation starts serving: what must not run for a config that is only
 * checked (--check-config) or that a reload refuses (a health check's
 * thread). builtin_keep: 0, -EEXIST (the name is taken) or -ENOMEM
 * (nothing kept, obj not freed). */
int builtin_keep(struct colibri_server *srv, const char *kind, const char *name, void *obj,
                 void (*free_fn)(void *), void (*live_fn)(void *));
void *builtin_find(struct colibri_server *srv, const char *kind, const char *name);
/* The generation starts serving: each kept object's live_fn, once. */
void builtin_live(struct colibri_server *srv);
/* The kept objects freed (the server's routes went first). */
void builtin_release(struct colibri_server *srv);

/* A module that connects to other servers (a gateway's upstreams) names
 * each address while its config loads: with "sandbox = true", socket()
 * and connect() are allowed for those address families only (seccomp),
 * and TCP connects to those ports only (Landlock, ABI 4 and later).
 * During a reload of a sandboxed server an address the start-up did not
 * allow gives -EACCES with err set. */
struct sockaddr;
int builtin_allow_connect(struct colibri_server *srv, const struct sockaddr *addr, char *err,
                          size_t errlen);

/* Modules whose sections stand at the top level of a config file, not in a
 * site ("upstream NAME { }"): the loader hands them to the module of that
 * name before the sites load, and refuses them inside a site. */
#define BUILTIN_TOP_LEVEL_MODULES                                                                  \
    {                                                                                              \
        "upstream"                                                                                 \
    }
