/* Validation of what a plugin declares: its descriptor and every callback group and
 * static table it points to, before the host uses any of it. Messages name the field
 * ("lowering.patterns[2] 'conv': kernel: required callback 'run' is NULL"). */
#ifndef QH_PLUGIN_VALIDATE_PRIVATE_H
#define QH_PLUGIN_VALIDATE_PRIVATE_H

#include "plugin/plugin.h"
#include "hostapi/sdk-private.h"

/* Check desc and copy what the host keeps into a new QhPluginInfo. path is the file
 * (used as the message prefix and copied into the info); expected_name may be NULL. */
QhPluginInfo *qh_plugin_validate_desc(const QhPluginDesc *desc, const char *path,
                                      const char *expected_name, GError **error);

/* TRUE when value is acceptable for an option of this declaration; else the reason. */
gboolean qh_plugin_option_value_ok(const QhPluginOptionInfo *opt, const char *value, char **reason);

/* TRUE when name matches [a-z][a-z0-9_]{0,31}. */
gboolean qh_plugin_name_is_valid(const char *name);

#endif
