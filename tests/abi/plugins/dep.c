/* A library a test plugin links against and that is then not on the loader's path:
 * the host's message must name it (tests/abi, case missing_dependency). */
int qh_abi_dep_value(void);
int qh_abi_dep_value(void) { return 42; }
