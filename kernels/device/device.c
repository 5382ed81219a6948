#include "kernels/device/device.h"

#include <stdio.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "kernels/base/units.h"

ab_status ab_device_close(ab_device_t *d, ab_diag_t *diag) {
  if (d == NULL) return AB_OK;
  return d->ops->close(d, diag);
}

bool ab_device_budget_allows(ab_device_t *d, uint64_t extra) {
  uint64_t need = extra > UINT64_MAX - d->held_bytes ? UINT64_MAX : d->held_bytes + extra;
  bool allows = d->budget_bytes == 0 || need <= d->budget_bytes;
  if (allows && need > d->budget_lo) d->budget_lo = need;
  if (!allows && need - 1 < d->budget_hi) d->budget_hi = need - 1;
  return allows;
}

bool ab_device_take_budget(ab_device_t *d, uint64_t budget) {
  if (d->kind != AB_DEVICE_SIM || budget == 0 || budget < d->budget_lo || budget > d->budget_hi) return false;
  d->budget_bytes = budget;
  return true;
}

void ab_device_hold(ab_device_t *d, int64_t delta) {
  d->held_bytes = (uint64_t)((int64_t)d->held_bytes + delta);
  if (d->held_bytes > d->held_peak) d->held_peak = d->held_bytes;
}

void ab_device_footprint_add(ab_device_t *d, int64_t delta) {
  d->footprint_bytes = delta < 0 && (uint64_t)-delta > d->footprint_bytes ? 0 : (uint64_t)((int64_t)d->footprint_bytes + delta);
  if (d->footprint_bytes > d->footprint_peak) d->footprint_peak = d->footprint_bytes;
}

void ab_device_footprint_reset_peak(ab_device_t *d) { d->footprint_peak = d->footprint_bytes; }

/* Counts a call and its failure. */
static ab_status counted(ab_device_t *d, ab_status st) {
  if (st != AB_OK) d->calls.failed++;
  return st;
}

ab_status ab_device_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  if (!ab_device_budget_allows(d, bytes)) return AB_ERR_OOM;
  d->calls.malloc++;
  ab_status st = counted(d, d->ops->malloc(d, bytes, out));
  if (st == AB_OK) ab_device_hold(d, (int64_t)bytes);
  return st;
}

ab_status ab_device_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes) {
  d->calls.free++;
  ab_status st = counted(d, d->ops->free(d, p, bytes));
  if (st == AB_OK) ab_device_hold(d, -(int64_t)bytes);
  return st;
}

ab_status ab_device_va_reserve(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  d->calls.va_reserve++;
  return counted(d, d->ops->va_reserve(d, bytes, out));
}

ab_status ab_device_va_release(ab_device_t *d, ab_dptr_t base, uint64_t bytes) {
  d->calls.va_release++;
  return counted(d, d->ops->va_release(d, base, bytes));
}

ab_status ab_device_map(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  if (!ab_device_budget_allows(d, bytes)) return AB_ERR_OOM;
  d->calls.map++;
  ab_status st = counted(d, d->ops->map(d, at, bytes));
  if (st == AB_OK) ab_device_hold(d, (int64_t)bytes);
  return st;
}

ab_status ab_device_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  d->calls.unmap++;
  ab_status st = counted(d, d->ops->unmap(d, at, bytes));
  if (st == AB_OK) ab_device_hold(d, -(int64_t)bytes);
  return st;
}

/* The pool's reserve moves inside the implementation, which keeps held_bytes itself. */
ab_status ab_device_pool_configure(ab_device_t *d, uint64_t release_threshold) {
  return d->ops->pool_configure(d, release_threshold);
}

ab_status ab_device_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  d->calls.malloc_async++;
  return counted(d, d->ops->malloc_async(d, bytes, stream, out));
}

ab_status ab_device_free_async(ab_device_t *d, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  d->calls.free_async++;
  return counted(d, d->ops->free_async(d, p, bytes, stream));
}

ab_status ab_device_pool_trim(ab_device_t *d, uint64_t keep_bytes) {
  return d->ops->pool_trim(d, keep_bytes);
}

ab_status ab_device_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak) {
  return d->ops->pool_reserved(d, current, peak);
}

ab_status ab_device_pool_reset_peak(ab_device_t *d) { return d->ops->pool_reset_peak(d); }

ab_status ab_device_mem_info(ab_device_t *d, uint64_t *free_bytes, uint64_t *total_bytes) {
  AB_TRY(d->ops->mem_info(d, free_bytes, total_bytes));
  if (d->budget_bytes) {
    uint64_t left = d->held_bytes < d->budget_bytes ? d->budget_bytes - d->held_bytes : 0;
    if (left < *free_bytes) *free_bytes = left;
  }
  return AB_OK;
}

ab_status ab_device_synchronize(ab_device_t *d) {
  d->calls.synchronize++;
  return d->ops->synchronize(d);
}

ab_status ab_device_stream_synchronize(ab_device_t *d, unsigned stream) {
  d->calls.synchronize++;
  return d->ops->stream_synchronize(d, stream);
}

void *ab_device_stream_handle(ab_device_t *d, unsigned stream) {
  return d->ops->stream_handle(d, stream);
}

ab_status ab_device_timer_start(ab_device_t *d, unsigned stream) {
  if (d->ops->timer_start) return d->ops->timer_start(d, stream);
  d->timer_modeled_ns = d->modeled_ns;
  d->timer_host_ns = ab_clock_ns();
  return AB_OK;
}

ab_status ab_device_timer_stop(ab_device_t *d, unsigned stream, double *seconds) {
  if (d->ops->timer_stop) return d->ops->timer_stop(d, stream, seconds);
  uint64_t ns = ab_clock_ns() - d->timer_host_ns + (d->modeled_ns - d->timer_modeled_ns);
  *seconds = (double)ns * 1e-9;
  return AB_OK;
}
