#include "strategies/protocol/trace_actions.h"

#include <string.h>

static const char *const action_names[] = {
#define AB_TRACE_ACTION_NAME(name, text) text,
    AB_TRACE_ACTIONS(AB_TRACE_ACTION_NAME)
#undef AB_TRACE_ACTION_NAME
};
#define NACTIONS (sizeof action_names / sizeof action_names[0])

const char *ab_trace_action_name(ab_trace_action_t a) { return (size_t)a < NACTIONS ? action_names[a] : "other"; }

ab_trace_action_t ab_trace_action_of(const char *name, size_t len) {
  for (size_t i = 0; i < NACTIONS; i++)
    if (len > 0 && action_names[i][0] == name[0] && strlen(action_names[i]) == len &&
        memcmp(action_names[i], name, len) == 0)
      return (ab_trace_action_t)i;
  return AB_TR_OTHER;
}
