/* lex.h - passes 1 to 3 of the compiler: a region's source (c->src, c->len)
 * to the token list (c->toks) that emit.c turns into ops. They run in this
 * order, once per region. tpl_lex() and tpl_match() return 0, or -EINVAL
 * with the message in c->err.
 */
#pragma once

#include "tpl/compiler.h"

/* Pass 1: text and tags, applying set-delimiter tags as they come. Checks
 * the name of each tag (the new delimiters of a set-delimiter tag). */
int tpl_lex(struct compiler *c);

/* Pass 2: pairs every section, parent and block with its closing tag
 * (token.match, both ways), with c->stack for scratch. */
int tpl_match(struct compiler *c);

/* Pass 3: marks the tags that have a line to themselves and trims that line
 * from the neighbouring texts: the whitespace before such a tag becomes its
 * indent, the common indentation of a standalone block's lines its dedent. */
void tpl_standalone(struct compiler *c);
