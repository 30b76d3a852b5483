/* calls.h - the ops that call something that ends with OP_RETURN: partials
 * and parents (a region of the template, or a template compiled for this
 * render when the data name it), blocks (an override in scope, or the
 * default body) and lambdas (their result, compiled in the current
 * context). A call saves where to return, the indentation and the override
 * scopes on the control stack; at most TPL_MAX_DEPTH calls are nested.
 */
#pragma once

#include <stdint.h>

#include "tpl/render.h"

/* OP_PARTIAL, OP_PARENT and their dynamic forms. */
int tpl_call_partial(struct render *r, const struct tpl_op *op);

/* OP_BLOCK. */
int tpl_call_block(struct render *r, const struct tpl_op *op);

/* Calls the lambda fn (data is its struct, or the tpl_value's data) for op,
 * an OP_VAR or an OP_SECTION, and returns to ret. */
int tpl_call_lambda(struct render *r, tpl_lambda_fn *fn, const void *data, const struct tpl_op *op,
                    uint32_t ret);

/* OP_RETURN inside a call: back to where it returns to; the output of a
 * call that must be escaped (an escaped variable's lambda) is escaped now. */
int tpl_leave_call(struct render *r);
