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
