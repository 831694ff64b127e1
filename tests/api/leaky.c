/* A library that exports an internal name next to an API one: check_exports.py must
 * refuse it (tests/api/CMakeLists.txt, api/exports_refuse_leak). */
int qh_graph_new(void);
int qhost_api_version(void);
int qh_graph_new(void) { return 0; }
int qhost_api_version(void) { return 1000; }
