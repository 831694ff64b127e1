/* qhost plugin ABI: versions, the export macro, and the rules every ABI struct follows.
 *
 * Rules (sdk/docs/ABI_RULES.md has the long form):
 *  - Every struct that crosses the boundary starts with `uint32_t abi_version`
 *    (QH_ABI_MAJOR << 16 | QH_ABI_MINOR of the SDK it was compiled against) and
 *    `uint32_t struct_size` (sizeof the struct in that SDK). Fill both with
 *    QH_STRUCT_HEADER(Type); never write a size by hand.
 *  - Structs only grow at the end. Fields are never removed, reordered or retyped.
 *    Fields added after 1.0 sit under an "Added in ABI 1.N" marker.
 *  - A reader uses a field only when the writer's struct_size covers it
 *    (QH_HAS_FIELD); otherwise the default written next to the field applies.
 *  - A plugin loads when its major equals the host's and its minor is not newer.
 *  - Only fixed-width integers, float/double, size_t, UTF-8 `const char *`, opaque
 *    handles and pointers cross the boundary: no bool, no enum-typed fields, no
 *    bit-fields, no long, no FILE *, no struct passed or returned by value.
 *    Enumerations are #defined int32_t constants; booleans are bits in uint32_t flags.
 *  - Flags arguments and fields must be 0 in every bit not defined by the SDK the
 *    plugin was built against; the host refuses unknown bits.
 *
 * Since: ABI 1.0; QH_ABI_MINOR is 2 since ABI 1.2 (CHANGELOG-ABI.md). */
#ifndef QHOST_ABI_H
#define QHOST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QH_ABI_MAJOR 1
#define QH_ABI_MINOR 2
/* The version an SDK struct carries in its abi_version field. */
#define QH_ABI_VERSION (((uint32_t)QH_ABI_MAJOR << 16) | (uint32_t)QH_ABI_MINOR)
#define QH_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define QH_ABI_VERSION_MINOR(v) ((uint32_t)(v)&0xffffu)

/* The one symbol a plugin exports (see qhost-plugin.h). */
#define QH_PLUGIN_ENTRY_SYMBOL "qhost_plugin_init"

#if defined(__GNUC__) || defined(__clang__)
#define QH_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define QH_PLUGIN_EXPORT
#endif

/* Initialiser for the two leading fields of any ABI struct:
 *   static const QhKernelOps ops = { QH_STRUCT_HEADER(QhKernelOps), ... };
 *   QhQParams out = { QH_STRUCT_HEADER(QhQParams) };   (the rest zero)
 * In C the two fields are designated, so members left out are zero without
 * -Wmissing-field-initializers noise; positional members may follow. */
#ifdef __cplusplus
#define QH_STRUCT_HEADER(type) QH_ABI_VERSION, (uint32_t)sizeof(type)
#else
#define QH_STRUCT_HEADER(type) .abi_version = QH_ABI_VERSION, .struct_size = (uint32_t)sizeof(type)
#endif

/* Non-zero when the struct at `ptr` (whose struct_size the writer set) covers `field`
 * of `type`. Readers of structs written by the other side use it before every field
 * that was added after 1.0. */
#define QH_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* Ids of nodes and values inside a graph handle; QH_INVALID_ID for "none". */
#define QH_INVALID_ID UINT32_MAX

#ifdef __cplusplus
}
#endif

#endif
