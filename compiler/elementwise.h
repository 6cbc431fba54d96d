/* The element-wise form of an epilogue kernel (docs/language.md,
 * "Element-wise epilogues"):
 *
 *   kernel k(acc: tensor<i32>, ..., y: tensor<u8>, ...) {
 *     let ... (per layer)
 *     elementwise a in acc along axis -> y {
 *       channel c { let ... (per channel) }
 *       value of y's element from a
 *     }
 *   }
 *
 * becomes, before checking, three ordinary kernels: k itself, whose body walks
 * acc as [outer, channels, inner] around `axis`; `k.tile`, which the
 * runtime calls on a block of accumulator rows while they are in cache, one
 * row a channel, without an int32 tensor in memory. Its parameters are k's
 * followed by c0 (the first row's channel), rows, cols, acc_rs (the
 * accumulator's row stride), y_off and y_rs (where y's first element of the
 * block is, and its row stride); see qr_tile_* in runtime/recipe.h. And
 * `k.nhwc`, the same for blocks whose columns are channels (NHWC
 * convolutions'): the six, then ew.fill and one tensor<i64> table per channel
 * let. Called with ew.fill 1 it evaluates the channel block for channels
 * c0 .. c0 + cols into the tables (each let's bits, ew.bits); with 0 it reads
 * them back (ew.from_bits, typed by the let's own value, which is not run), so
 * the per-channel part runs once per layer, not once per block and row. */
#ifndef QC_ELEMENTWISE_H
#define QC_ELEMENTWISE_H

#include "../lang/arena.h"
#include "../lang/ast.h"
#include "../lang/diag.h"

/* The number of parameters the tile kernel adds after the kernel's own. */
#define QC_TILE_EXTRA_PARAMS 6

/* Rewrites every elementwise statement of module (a parsed file) in place and
 * appends the tile kernels to its items; misplaced ones are reported to d and
 * removed. Returns the number of errors reported. */
int qc_elementwise_lower(ql_node *module, ql_arena *ar, ql_diags *d);

#endif
