/* kernels_stub.c: the kernels in a build without CUDA. No device can run them, so
 * ab_kernels_open hands out no context and the functions that take one are never reached;
 * no communicator can be made either. */
#include "kernels/kernels.h"

ab_status ab_kernels_open(ab_device_t *dev, ab_kernels_t **out, ab_diag_t *diag) {
  (void)dev;
  (void)diag;
  *out = NULL;
  return AB_OK;
}

ab_status ab_kernels_close(ab_kernels_t *kx, ab_diag_t *diag) {
  (void)kx;
  (void)diag;
  return AB_OK;
}

/* What every function that needs a context answers: there is none in this build. */
static ab_status no_context(void) { return AB_ERR_INTERNAL; }

ab_status ab_kernels_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t buf[AB_KERNEL_MAX_BUFS],
                            unsigned stream) {
  (void)kx, (void)k, (void)buf, (void)stream;
  return no_context();
}

ab_status ab_kernels_mark(ab_kernels_t *kx) {
  (void)kx;
  return no_context();
}

ab_status ab_kernels_join(ab_kernels_t *kx, unsigned from, unsigned to) {
  (void)kx, (void)from, (void)to;
  return no_context();
}

ab_status ab_kernels_timing(ab_kernels_t *kx, double *mark_ms, size_t cap, size_t *n, double *kernel_ms) {
  (void)kx, (void)mark_ms, (void)cap;
  *n = 0;
  *kernel_ms = 0;
  return no_context();
}

ab_status ab_kernels_fill(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, unsigned stream) {
  (void)kx, (void)p, (void)bytes, (void)id, (void)stream;
  return no_context();
}

ab_status ab_kernels_check(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, ab_pattern_fault_t *fault) {
  (void)kx, (void)p, (void)bytes, (void)id;
  fault->bad = false;
  return no_context();
}

ab_status ab_kernels_upload(ab_kernels_t *kx, ab_dptr_t dst, const void *src, uint64_t bytes) {
  (void)kx, (void)dst, (void)src, (void)bytes;
  return no_context();
}

ab_status ab_kernels_download(ab_kernels_t *kx, void *dst, ab_dptr_t src, uint64_t bytes) {
  (void)kx, (void)dst, (void)src, (void)bytes;
  return no_context();
}

static ab_status no_cuda(ab_diag_t *diag) {
  return ab_diag_set(diag, AB_ERR_CUDA, "NCCL: allocbench was built without CUDA");
}

ab_status ab_comm_load(const char *path, ab_diag_t *diag) {
  (void)path;
  return no_cuda(diag);
}

const char *ab_comm_library(int *version) {
  *version = 0;
  return NULL;
}

ab_status ab_comm_unique_id(ab_comm_id_t *id, ab_diag_t *diag) {
  (void)id;
  return no_cuda(diag);
}

ab_status ab_comm_init_all(unsigned n, const int *ordinals, const ab_waits_t *w, ab_comm_t **out, ab_diag_t *diag) {
  (void)n, (void)ordinals, (void)w, (void)out;
  return no_cuda(diag);
}

ab_status ab_comm_init_rank(int ordinal, unsigned nranks, unsigned rank, const ab_comm_id_t *id, const ab_waits_t *w,
                            ab_comm_t **out, ab_diag_t *diag) {
  (void)ordinal, (void)nranks, (void)rank, (void)id, (void)w, (void)out;
  return no_cuda(diag);
}

/* No communicator exists in this build, so these are never reached with one. */
unsigned ab_comm_rank(const ab_comm_t *c) {
  (void)c;
  return 0;
}

unsigned ab_comm_size(const ab_comm_t *c) {
  (void)c;
  return 0;
}

uint64_t ab_comm_bytes(const ab_comm_t *c) {
  (void)c;
  return 0;
}

ab_status ab_comm_abort(ab_comm_t *c, const char *why, ab_diag_t *diag) {
  (void)c, (void)why;
  return no_cuda(diag);
}

void ab_comm_aborted(ab_comm_t *c, char *why, size_t size) {
  (void)c;
  if (size) why[0] = '\0';
}

ab_status ab_comm_destroy(ab_comm_t *c, ab_diag_t *diag) {
  (void)c, (void)diag;
  return AB_OK;
}

void ab_kernels_set_comm(ab_kernels_t *kx, ab_comm_t *c) { (void)kx, (void)c; }
