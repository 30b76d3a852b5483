/* emit.h - pass 4 of the compiler: a region's tokens (lex.h) to ops,
 * appended to c->ops with their source positions in c->pos. Names are
 * resolved (resolve.h) and partials queued as regions on the way. Both
 * return 0, or < 0 with the message in c->err.
 */
#pragma once

#include "tpl/compiler.h"

/* Appends one op. */
int tpl_emit(struct compiler *c, struct tpl_op op, struct tpl_pos pos);

/* Emits the region being compiled, ending with its OP_RETURN. */
int tpl_emit_region(struct compiler *c);
