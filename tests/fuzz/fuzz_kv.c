/* fuzz_kv.c: option lists (kernels/base/units.h) and every strategy's -c, from any text.
 *
 * The first byte picks the separator (':' or '='), the rest is the text. It parses into items
 * that lie inside the text, or is refused naming the input; every typed getter takes every
 * item's value or refuses it; ab_kv_finish then passes (every key was asked for). Each
 * strategy the users can pick, given the text as its -c, is created or refused as invalid
 * input, and a created one serves and frees allocations on the simulated card, its invariants
 * holding, with nothing leaked. */
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "tests/fuzz/fuzz.h"

static void refused(ab_status st, const ab_diag_t *d, const char *what) {
  if (st != AB_ERR_INVALID) ab_fuzz_fail("%s refused as %s: %s", what, ab_status_name(st), d->msg);
  if (strncmp(d->msg, what, strlen(what)) != 0) ab_fuzz_fail("the message does not name %s: %s", what, d->msg);
}

static void getters(const char *text, char sep) {
  ab_kvlist_t kv;
  ab_diag_t d = {""};
  ab_status st = ab_kv_parse("-c", text, sep, &kv, &d);
  if (st != AB_OK) {
    refused(st, &d, "-c '");
    return;
  }
  if (kv.n > AB_KV_MAX) ab_fuzz_fail("%zu items", kv.n);
  size_t len = strlen(text);
  for (size_t i = 0; i < kv.n; i++) {
    const ab_kv_t *it = &kv.items[i];
    if (it->key_len == 0 || it->key < text || it->key + it->key_len > text + len || it->val < text ||
        it->val + it->val_len > text + len || it->pos != (size_t)(it->key - text) + 1)
      ab_fuzz_fail("item %zu is not inside the text '%s'", i, text);
  }
  static const char *const choices[] = {"True", "False", "max", NULL};
  for (size_t i = 0; i < kv.n; i++) {
    char key[80], value[16];
    const ab_kv_t *it = &kv.items[i];
    memcpy(key, it->key, it->key_len < sizeof key ? it->key_len : sizeof key - 1);
    key[it->key_len < sizeof key ? it->key_len : sizeof key - 1] = '\0';
    uint64_t u = 0;
    double x = 0;
    bool b = false;
    int c = 0;
    /* Each getter either takes the value or refuses it naming the list; none may crash. */
    if ((st = ab_kv_get_size(&kv, key, &u, &d)) != AB_OK) refused(st, &d, "-c '");
    u = 0;
    if ((st = ab_kv_get_u64(&kv, key, 1, 1000, &u, &d)) != AB_OK) refused(st, &d, "-c '");
    if (st == AB_OK && u > 1000)
      ab_fuzz_fail("'%s': %llu taken for a number from 1 to 1000", text, (unsigned long long)u);
    if ((st = ab_kv_get_double(&kv, key, -1e6, 1e6, &x, &d)) != AB_OK) refused(st, &d, "-c '");
    if ((st = ab_kv_get_bool(&kv, key, &b, &d)) != AB_OK) refused(st, &d, "-c '");
    if ((st = ab_kv_get_choice(&kv, key, choices, &c, &d)) != AB_OK) refused(st, &d, "-c '");
    if ((st = ab_kv_value(&kv, it, value, sizeof value, &d)) != AB_OK) refused(st, &d, "-c '");
    ab_kv_errorf(&kv, it, &d, "%s", key);
  }
  st = ab_kv_finish(&kv, "any", &d);
  if (st != AB_OK) refused(st, &d, "-c '"); /* keys longer than the buffer above were not asked for */
}

static void strategy_conf(const char *name, const char *conf) {
  ab_diag_t d = {""};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  if (ab_device_open("sim", NULL, &dev, &d) != AB_OK) ab_fuzz_fail("sim: %s", d.msg);
  ab_status st = ab_strategy_create(name, dev, conf, &s, &d);
  if (st == AB_OK) {
    static const uint64_t sizes[] = {1, 4096, 3 << 20, 300 << 20};
    ab_dptr_t p[4];
    for (size_t i = 0; i < 4; i++) {
      st = ab_strategy_alloc(s, sizes[i], (unsigned)i % 2, &p[i]);
      if (st != AB_OK && st != AB_ERR_OOM) ab_fuzz_fail("%s -c '%s': alloc: %s", name, conf, ab_strerror(st));
      if (st != AB_OK) p[i] = 0;
    }
    for (size_t i = 0; i < 4; i++)
      if (p[i] && ab_strategy_free(s, p[i], sizes[i], (unsigned)i % 2) != AB_OK)
        ab_fuzz_fail("%s -c '%s': free: %s", name, conf, dev->diag.msg);
    if (ab_strategy_check(s, &d) != AB_OK) ab_fuzz_fail("%s -c '%s': %s", name, conf, d.msg);
    ab_strategy_destroy(s);
  } else if (st != AB_ERR_INVALID && st != AB_ERR_OOM) { /* an initial pool larger than the card is an OOM */
    ab_fuzz_fail("%s -c '%s': refused as %s: %s", name, conf, ab_status_name(st), d.msg);
  }
  if (ab_device_close(dev, &d) != AB_OK) ab_fuzz_fail("%s -c '%s': %s", name, conf, d.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  char *text = malloc(size);
  if (text == NULL) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  getters(text, data[0] & 1 ? '=' : ':');
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++)
    if (!all[i].hidden) strategy_conf(all[i].name, text);
  free(text);
  return 0;
}
