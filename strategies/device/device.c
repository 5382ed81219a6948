#include "strategies/device/device.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "strategies/device/cuda.h"
#include "strategies/device/sim.h"
#include "strategies/units.h"

ab_status ab_device_open(const char *spec, const ab_device_config_t *cfg, ab_device_t **out,
                         ab_diag_t *diag) {
  static const ab_device_config_t defaults = {0};
  if (cfg == NULL) cfg = &defaults;
  *out = NULL;
  if (spec == NULL || *spec == '\0') spec = "auto";
  if (strcmp(spec, "auto") == 0) spec = ab_device_cuda_usable() ? "cuda" : "sim";

  ab_status st;
  if (strcmp(spec, "sim") == 0 || strncmp(spec, "sim:", 4) == 0) {
    const char *what = spec[3] == ':' ? spec + 4 : "h200";
    uint64_t total = 0;
    unsigned n;
    const ab_sim_profile_t *profiles = ab_sim_profiles(&n);
    for (unsigned i = 0; i < n; i++)
      if (strcmp(what, profiles[i].name) == 0) total = profiles[i].total_bytes;
    if (total == 0) {
      ab_diag_t inner;
      if (ab_parse_size("--device sim", what, &total, &inner) != AB_OK || total == 0) {
        char names[256] = "";
        for (unsigned i = 0; i < n; i++) {
          size_t used = strlen(names);
          snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", profiles[i].name);
        }
        return ab_diag_set(diag, AB_ERR_INVALID,
                           "--device '%s': unknown simulated card '%s' (expected a profile: %s; or a capacity such as 40GB)",
                           spec, what, names);
      }
    }
    st = ab_sim_open(what, total, cfg, out, diag);
  } else if (strcmp(spec, "cuda") == 0 || strncmp(spec, "cuda:", 5) == 0) {
    uint64_t ordinal = 0;
    if (spec[4] == ':') {
      ab_diag_t inner;
      if (ab_parse_u64("--device cuda", spec + 5, 1023, &ordinal, &inner) != AB_OK)
        return ab_diag_set(diag, AB_ERR_INVALID, "--device '%s': expected cuda:N with N a GPU index", spec);
    }
    if (cfg->faults.fail_nth || cfg->faults.fail_rate > 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "fault injection works on the simulated device only (--device sim)");
    if (cfg->plan_len)
      return ab_diag_set(diag, AB_ERR_INVALID, "recorded addresses work on the simulated device only (--device sim)");
    st = ab_cuda_open((int)ordinal, cfg, out, diag);
  } else {
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--device '%s': expected auto, sim, sim:PROFILE, sim:SIZE, cuda or cuda:N", spec);
  }
  if (st != AB_OK) return st;
  if (cfg->budget_bytes > (*out)->total_bytes) {
    char b[32], t[32];
    ab_format_bytes(cfg->budget_bytes, b, sizeof b);
    ab_format_bytes((*out)->total_bytes, t, sizeof t);
    ab_device_close(*out, NULL);
    *out = NULL;
    return ab_diag_set(diag, AB_ERR_INVALID, "--budget %s is more than the device's total of %s", b, t);
  }
  (*out)->budget_bytes = cfg->budget_bytes;
  return AB_OK;
}

ab_status ab_device_close(ab_device_t *d, ab_diag_t *diag) {
  if (d == NULL) return AB_OK;
  return d->ops->close(d, diag);
}

bool ab_device_budget_allows(const ab_device_t *d, uint64_t extra) {
  return d->budget_bytes == 0 || (extra <= d->budget_bytes && d->held_bytes <= d->budget_bytes - extra);
}

void ab_device_hold(ab_device_t *d, int64_t delta) {
  d->held_bytes = (uint64_t)((int64_t)d->held_bytes + delta);
  if (d->held_bytes > d->held_peak) d->held_peak = d->held_bytes;
}

static void observed(ab_device_t *d, ab_device_op_t op, ab_dptr_t addr, uint64_t bytes) {
  if (d->observe) d->observe(d->observe_ctx, op, addr, bytes);
}

/* Counts a call and its failure. */
static ab_status counted(ab_device_t *d, ab_status st) {
  if (st != AB_OK) d->calls.failed++;
  return st;
}

ab_status ab_device_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  if (!ab_device_budget_allows(d, bytes)) return AB_ERR_OOM;
  d->calls.malloc++;
  ab_status st = counted(d, d->ops->malloc(d, bytes, out));
  if (st == AB_OK) {
    ab_device_hold(d, (int64_t)bytes);
    observed(d, AB_DEVOP_MALLOC, *out, bytes);
  }
  return st;
}

ab_status ab_device_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes) {
  d->calls.free++;
  ab_status st = counted(d, d->ops->free(d, p, bytes));
  if (st == AB_OK) {
    ab_device_hold(d, -(int64_t)bytes);
    observed(d, AB_DEVOP_FREE, p, bytes);
  }
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
  if (st == AB_OK) {
    ab_device_hold(d, (int64_t)bytes);
    observed(d, AB_DEVOP_MAP, at, bytes);
  }
  return st;
}

ab_status ab_device_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  d->calls.unmap++;
  ab_status st = counted(d, d->ops->unmap(d, at, bytes));
  if (st == AB_OK) {
    ab_device_hold(d, -(int64_t)bytes);
    observed(d, AB_DEVOP_UNMAP, at, bytes);
  }
  return st;
}

/* The pool's reserve moves inside the implementation, which keeps held_bytes itself. */
ab_status ab_device_pool_configure(ab_device_t *d, uint64_t release_threshold) {
  return d->ops->pool_configure(d, release_threshold);
}

ab_status ab_device_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  d->calls.malloc_async++;
  ab_status st = counted(d, d->ops->malloc_async(d, bytes, stream, out));
  if (st == AB_OK) observed(d, AB_DEVOP_MALLOC_ASYNC, *out, bytes);
  return st;
}

ab_status ab_device_free_async(ab_device_t *d, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  d->calls.free_async++;
  ab_status st = counted(d, d->ops->free_async(d, p, bytes, stream));
  if (st == AB_OK) observed(d, AB_DEVOP_FREE_ASYNC, p, bytes);
  return st;
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

static uint64_t host_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

ab_status ab_device_timer_start(ab_device_t *d, unsigned stream) {
  if (d->ops->timer_start) return d->ops->timer_start(d, stream);
  d->timer_modeled_ns = d->modeled_ns;
  d->timer_host_ns = host_ns();
  return AB_OK;
}

ab_status ab_device_timer_stop(ab_device_t *d, unsigned stream, double *seconds) {
  if (d->ops->timer_stop) return d->ops->timer_stop(d, stream, seconds);
  uint64_t ns = host_ns() - d->timer_host_ns + (d->modeled_ns - d->timer_modeled_ns);
  *seconds = (double)ns * 1e-9;
  return AB_OK;
}
