/* pattern.cu: filling and checking the verification pattern (Note [Verify pattern]).
 *
 * An allocation whose start is 8-byte aligned is written and read in 64-bit words, and its
 * last bytes (size mod 8) one by one; an unaligned one byte by byte. The check finds the
 * first differing byte with an atomic minimum in a device variable, so it needs no device
 * allocation of its own. */
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/pattern.h"

/* The first differing byte offset of the running check; UINT64_MAX: none. */
static __device__ unsigned long long first_bad;

#define NONE 0xFFFFFFFFFFFFFFFFULL

/* Words [0, nwords) of p as uint64_t, then bytes [8 nwords, nbytes) one at a time. */
__global__ void fill_kernel(unsigned char *p, uint64_t nwords, uint64_t nbytes, uint32_t id) {
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t *w = (uint64_t *)p;
  for (uint64_t j = i; j < nwords; j += stride) w[j] = ab_pattern_word(id, j);
  for (uint64_t o = nwords * 8 + i; o < nbytes; o += stride) p[o] = ab_pattern_byte(id, o);
}

__global__ void check_kernel(const unsigned char *p, uint64_t nwords, uint64_t nbytes, uint32_t id) {
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t *w = (const uint64_t *)p;
  for (uint64_t j = i; j < nwords; j += stride) {
    uint64_t diff = w[j] ^ ab_pattern_word(id, j);
    if (diff) atomicMin(&first_bad, (unsigned long long)(j * 8 + (uint64_t)(__ffsll((long long)diff) - 1) / 8));
  }
  for (uint64_t o = nwords * 8 + i; o < nbytes; o += stride)
    if (p[o] != ab_pattern_byte(id, o)) atomicMin(&first_bad, (unsigned long long)o);
}

/* The grid for an allocation: one thread per word, or per byte when unaligned. */
static void geometry(ab_dptr_t p, uint64_t bytes, uint64_t *nwords, unsigned *blocks) {
  *nwords = p % 8 == 0 ? bytes / 8 : 0;
  *blocks = ab_kx_blocks(*nwords + (bytes - *nwords * 8));
}

ab_status ab_kernels_fill(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, unsigned stream) {
  cudaStream_t s = (cudaStream_t)ab_device_stream_handle(kx->dev, stream);
  if (s == NULL && stream != 0) return AB_ERR_CUDA; /* the device said why in its diag */
  uint64_t nwords;
  unsigned blocks;
  geometry(p, bytes, &nwords, &blocks);
  fill_kernel<<<blocks, AB_KX_THREADS, 0, s>>>((unsigned char *)(uintptr_t)p, nwords, bytes, id);
  AB_CUDA_TRY(&kx->dev->diag, cudaGetLastError());
  return AB_OK;
}

ab_status ab_kernels_check(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, ab_pattern_fault_t *fault) {
  ab_diag_t *diag = &kx->dev->diag;
  memset(fault, 0, sizeof *fault);
  /* Work on every stream may still write the allocation: the check comes after all of it. */
  AB_CUDA_TRY(diag, cudaDeviceSynchronize());
  unsigned long long first = NONE;
  AB_CUDA_TRY(diag, cudaMemcpyToSymbol(first_bad, &first, sizeof first));
  uint64_t nwords;
  unsigned blocks;
  geometry(p, bytes, &nwords, &blocks);
  check_kernel<<<blocks, AB_KX_THREADS>>>((const unsigned char *)(uintptr_t)p, nwords, bytes, id);
  AB_CUDA_TRY(diag, cudaGetLastError());
  AB_CUDA_TRY(diag, cudaMemcpyFromSymbol(&first, first_bad, sizeof first));
  if (first == NONE) return AB_OK;
  fault->bad = true;
  fault->offset = first;
  uint64_t at = first & ~7ULL;
  if (at + 8 <= bytes) {
    AB_CUDA_TRY(diag, cudaMemcpy(&fault->word, (const void *)(uintptr_t)(p + at), 8, cudaMemcpyDeviceToHost));
    fault->have_word = true;
  }
  return AB_OK;
}
