#include "kernels/kernel_desc.h"

#include <string.h>

const char *ab_kernel_name(ab_kernel_op_t op) {
  switch (op) {
#define AB_KERNEL_CASE(name, text) \
  case name: return text;
    AB_KERNELS(AB_KERNEL_CASE)
#undef AB_KERNEL_CASE
    case AB_K_COUNT: break;
  }
  return "?";
}

uint64_t ab_dtype_bytes(ab_dtype_t t) { return t == AB_F32 ? 4 : 2; }

void ab_kernel_needs(const ab_kernel_t *k, uint64_t need[AB_KERNEL_MAX_BUFS]) {
  memset(need, 0, sizeof(uint64_t) * AB_KERNEL_MAX_BUFS);
  uint64_t in = ab_dtype_bytes((ab_dtype_t)k->dtype[0]), out = ab_dtype_bytes((ab_dtype_t)k->dtype[1]);
  switch ((ab_kernel_op_t)k->op) {
    case AB_K_GEMM:
      need[0] = k->m * k->k * in;
      need[1] = k->k * k->n * in;
      need[2] = k->m * k->n * out;
      break;
    case AB_K_GELU:
    case AB_K_CAST:
      need[0] = k->n * in;
      need[1] = k->n * out;
      break;
    case AB_K_ADAM:
      need[0] = need[2] = need[3] = k->n * 4;
      need[1] = k->n * in;
      break;
    case AB_K_SCALE_CHECK:
      need[0] = k->n * in;
      need[1] = 4;
      break;
    case AB_K_COPY:
      need[0] = need[1] = k->n;
      break;
    case AB_K_ALLGATHER:
    case AB_K_REDUCE_SCATTER:
      /* n bytes per rank on the shard side; the full side is checked against the world
       * size by the launcher, which knows it. */
      need[k->op == AB_K_ALLGATHER ? 0 : 1] = k->n;
      need[k->op == AB_K_ALLGATHER ? 1 : 0] = k->n;
      break;
    case AB_K_COUNT:
      break;
  }
}
