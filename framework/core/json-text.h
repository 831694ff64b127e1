/* Pretty JSON text of a finished json-glib builder, for the reports and listings. */
#ifndef QH_CORE_JSON_TEXT_H
#define QH_CORE_JSON_TEXT_H

#include <json-glib/json-glib.h>

/* The builder's document as indented JSON text. Takes the builder (unrefs it); the
 * caller frees the text with g_free. Never fails. */
char *qh_json_text(JsonBuilder *builder);

#endif
