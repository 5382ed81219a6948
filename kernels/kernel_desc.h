/* kernel_desc.h: a kernel as the event stream describes it (the KERNEL events of
 * events.h): which operation, on which live buffers, of which element types and shape.
 * The kernels (kernels.h) run these; the workloads emit them. */
#ifndef AB_KERNEL_DESC_H
#define AB_KERNEL_DESC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ab_dtype_e { AB_F32, AB_BF16, AB_F16, AB_DTYPE_COUNT } ab_dtype_t;

#define AB_KERNELS(X)                                                                       \
  X(AB_K_GEMM, "gemm")             /* C[m,n] = A[m,k] B[k,n]: buf A, B, C; dtype in, out */  \
  X(AB_K_GELU, "gelu")             /* out = gelu(in): buf in, out; n elements */             \
  X(AB_K_CAST, "cast")             /* out = in converted: buf in (dtype[0]), out (dtype[1]) */\
  X(AB_K_ADAM, "adam")             /* Adam update: buf param, grad, m, v; n elements, f32 */ \
  X(AB_K_SCALE_CHECK, "scale_check") /* grads *= scale, flag non-finite: buf grad, flag */  \
  X(AB_K_COPY, "copy")             /* device-to-device copy of n bytes: buf src, dst */      \
  X(AB_K_ALLGATHER, "allgather")   /* gather n bytes per rank: buf shard, full */            \
  X(AB_K_REDUCE_SCATTER, "reduce_scatter") /* reduce n bytes per rank: buf full, shard */

typedef enum ab_kernel_op_e {
#define AB_KERNEL_ENUM(name, text) name,
  AB_KERNELS(AB_KERNEL_ENUM)
#undef AB_KERNEL_ENUM
  AB_K_COUNT
} ab_kernel_op_t;

const char *ab_kernel_name(ab_kernel_op_t op);

#define AB_KERNEL_MAX_BUFS 4

typedef struct ab_kernel_s {
  uint8_t op;                      /* ab_kernel_op_t */
  uint8_t dtype[2];                /* input and output element types (ab_dtype_t) */
  uint8_t nbuf;                    /* buffers used, in the order the op documents */
  uint32_t buf[AB_KERNEL_MAX_BUFS]; /* allocation ids, live when the kernel runs */
  uint64_t m, n, k;                /* GEMM shape; n is the element (or byte) count otherwise */
} ab_kernel_t;

/* Bytes of one element of a dtype. */
uint64_t ab_dtype_bytes(ab_dtype_t t);
/* The bytes each buffer of a kernel must hold; fills need[0..nbuf). */
void ab_kernel_needs(const ab_kernel_t *k, uint64_t need[AB_KERNEL_MAX_BUFS]);

#ifdef __cplusplus
}
#endif

#endif
