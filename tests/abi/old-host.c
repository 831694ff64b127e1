/* A host of ABI 1.1, for the version rule seen from the plugin's side: compiled against
 * tests/abi/sdk-snapshots/1.1 alone, it presents the table a 1.1 host would (that
 * abi_version, that struct_size, only the frozen base filled) to one plugin's entry
 * point, as a vendor's binary meets an older qhost. A plugin built for 1.1 or older
 * must accept it; one built for 1.2 must refuse it through qh_plugin_check_host with
 * QH_ERR_ABI_MISMATCH and a message naming both versions.
 *
 * Usage: old-host PLUGIN.so accept
 *        old-host PLUGIN.so refuse "EXPECTED MESSAGE"
 * Exits 0 when the plugin behaved as expected, 1 (with the reason on stderr) if not. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qhost/qhost-plugin.h>

_Static_assert(QH_ABI_MAJOR == 1 && QH_ABI_MINOR == 1, "old-host.c is the 1.1 host: build it "
               "against tests/abi/sdk-snapshots/1.1");

struct QhStatus {
  int32_t code;
  char message[1024];
};

static QhStatus *status_new(int32_t code, const char *message) {
  QhStatus *st = calloc(1, sizeof *st);
  if (st == NULL)
    abort();
  st->code = code;
  snprintf(st->message, sizeof st->message, "%s", message ? message : "(no message)");
  return st;
}

static void status_free(QhStatus *st) { free(st); }

static void log_line(int32_t level, const char *message) {
  fprintf(stderr, "old-host: plugin log (level %d): %s\n", (int)level, message);
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[2], "accept") != 0 && (strcmp(argv[2], "refuse") != 0 || argc != 4))) {
    fprintf(stderr, "usage: %s PLUGIN.so accept | PLUGIN.so refuse MESSAGE\n", argv[0]);
    return 2;
  }
  void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (so == NULL) {
    fprintf(stderr, "old-host: %s\n", dlerror());
    return 1;
  }
  QhStatus *(*init)(const QhHostApi *, const QhPluginDesc **) = NULL;
  *(void **)&init = dlsym(so, QH_PLUGIN_ENTRY_SYMBOL);
  if (init == NULL) {
    fprintf(stderr, "old-host: %s: no %s\n", argv[1], QH_PLUGIN_ENTRY_SYMBOL);
    return 1;
  }
  /* Only the frozen base: a plugin may use nothing else before the versions agree. */
  static QhHostApi host;
  host.abi_version = QH_ABI_VERSION;
  host.struct_size = sizeof host;
  host.status_new = status_new;
  host.status_free = status_free;
  host.log = log_line;
  const QhPluginDesc *desc = NULL;
  QhStatus *st = init(&host, &desc);
  int ok;
  if (strcmp(argv[2], "accept") == 0) {
    ok = st == NULL && desc != NULL;
    if (!ok)
      fprintf(stderr, "old-host: %s refused a 1.1 host: %s\n", argv[1], st ? st->message : "no descriptor");
    else
      printf("%s loads in a 1.1 host (descriptor ABI %u.%u)\n", argv[1],
             (unsigned)QH_ABI_VERSION_MAJOR(desc->abi_version), (unsigned)QH_ABI_VERSION_MINOR(desc->abi_version));
  } else {
    ok = st != NULL && st->code == QH_ERR_ABI_MISMATCH && strcmp(st->message, argv[3]) == 0;
    if (!ok)
      fprintf(stderr, "old-host: %s: want QH_ERR_ABI_MISMATCH \"%s\", got %s (code %d)\n", argv[1], argv[3],
              st ? st->message : "success", st ? (int)st->code : 0);
    else
      printf("%s refuses a 1.1 host: %s\n", argv[1], st->message);
  }
  status_free(st);
  dlclose(so);
  return ok ? 0 : 1;
}
