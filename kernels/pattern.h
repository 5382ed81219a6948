/* pattern.h: the verification pattern, one definition for the host and the device.
 *
 * Note [Verify pattern]: byte o of allocation `id` holds byte (o mod 8) of the 64-bit
 * little-endian word
 *     ((id ^ AB_PATTERN_ID_XOR) << 32) | ((w * AB_PATTERN_W_MUL) ^ AB_PATTERN_W_XOR),   w = o / 8
 * (the low half in 32-bit arithmetic). Both halves can be inverted, so a word found where it
 * does not belong names the allocation that wrote it and the offset it wrote it at: an
 * allocator that handed the same memory to two live allocations is caught and both are
 * named. The XOR constants keep all-zero and all-one memory (what fresh or cleared memory
 * holds) from decoding to a small id. Word indices wrap at 2^32, so offsets decoded in an
 * allocation over 32 GiB are known modulo 32 GiB.
 *
 * Plain C when included from C; __host__ __device__ when compiled by nvcc.
 */
#ifndef AB_PATTERN_H
#define AB_PATTERN_H

#include <stdint.h>

#ifdef __CUDACC__
#define AB_HOST_DEVICE __host__ __device__
#else
#define AB_HOST_DEVICE
#endif

#define AB_PATTERN_ID_XOR 0xA5A5A5A5u
#define AB_PATTERN_W_MUL 0x9E3779B1u /* odd, so invertible modulo 2^32 */
#define AB_PATTERN_W_INV 0x0E8B2F51u /* AB_PATTERN_W_MUL * AB_PATTERN_W_INV == 1 (mod 2^32) */
#define AB_PATTERN_W_XOR 0x3C3C3C3Cu

/* The pattern word w of allocation id. */
static inline AB_HOST_DEVICE uint64_t ab_pattern_word(uint32_t id, uint64_t w) {
  uint32_t lo = ((uint32_t)w * AB_PATTERN_W_MUL) ^ AB_PATTERN_W_XOR;
  return ((uint64_t)(id ^ AB_PATTERN_ID_XOR) << 32) | lo;
}

/* The pattern byte at offset o of allocation id. */
static inline AB_HOST_DEVICE uint8_t ab_pattern_byte(uint32_t id, uint64_t o) {
  return (uint8_t)(ab_pattern_word(id, o >> 3) >> ((o & 7) * 8));
}

/* The allocation id and the byte offset (of the word's first byte) that would have written
 * word. Any word decodes to something; the caller judges whether that id is plausible. */
static inline AB_HOST_DEVICE void ab_pattern_decode(uint64_t word, uint32_t *id, uint64_t *offset) {
  *id = (uint32_t)(word >> 32) ^ AB_PATTERN_ID_XOR;
  *offset = (uint64_t)(((uint32_t)word ^ AB_PATTERN_W_XOR) * AB_PATTERN_W_INV) * 8;
}

#endif
