# qhost_add_plugin(): builds one qhost backend plugin the way the ABI requires.
#
# This one file serves three callers: the qhost source tree (sdk/CMakeLists.txt includes
# it), the build-tree QHostConfig.cmake (plugins/example_vitis) and the installed
# QHostConfig.cmake (a vendor's find_package(QHost)). Each sets, before including it:
#   QHOST_SDK_INCLUDE_DIR  the directory holding qhost/qhost-plugin.h
#   QHOST_SDK_MAP_FILE     the version script exporting only qhost_plugin_init
# and may set QHOST_PLUGIN_INSTALL_DIR (install destination, relative to the prefix).
# The values are captured at include time in global properties, so the function works
# from any directory of the project, not only below the one that included this file.
#
#   qhost_add_plugin(<name> SOURCES src.c... [LINK_LIBRARIES lib...]
#                    [OUTPUT_DIRECTORY dir] [NO_INSTALL])
#
# creates the MODULE target qhost-<name> whose file is libqhost-<name>.so: C11, hidden
# visibility, linked with the version script and -Wl,--no-undefined, with the SDK include
# directory as its only include directory. The file goes to OUTPUT_DIRECTORY, else to
# ${QHOST_PLUGIN_OUTPUT_DIR} when the caller's scope sets it, else to CMake's default; it
# is installed into ${QHOST_PLUGIN_INSTALL_DIR} (a caller's variable wins over the value
# captured at include time) unless NO_INSTALL is given (test plugins).

foreach(_qh_var QHOST_SDK_INCLUDE_DIR QHOST_SDK_MAP_FILE)
  if(NOT ${_qh_var})
    message(FATAL_ERROR "QhostPlugin.cmake: set ${_qh_var} before including it")
  endif()
  set_property(GLOBAL PROPERTY ${_qh_var} "${${_qh_var}}")
endforeach()
if(QHOST_PLUGIN_INSTALL_DIR)
  set_property(GLOBAL PROPERTY QHOST_PLUGIN_INSTALL_DIR "${QHOST_PLUGIN_INSTALL_DIR}")
else()
  set_property(GLOBAL PROPERTY QHOST_PLUGIN_INSTALL_DIR "lib/qhost/plugins")
endif()
unset(_qh_var)

function(qhost_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "NO_INSTALL" "OUTPUT_DIRECTORY"
                        "SOURCES;LINK_LIBRARIES")
  # The host accepts only these names and derives the file name from them.
  string(LENGTH "${name}" name_length)
  if(NOT name MATCHES "^[a-z][a-z0-9_]*$" OR name_length GREATER 32)
    message(FATAL_ERROR "qhost_add_plugin: '${name}' is not a plugin name "
                        "([a-z][a-z0-9_]{0,31})")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "qhost_add_plugin(${name}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "qhost_add_plugin(${name}): SOURCES is required")
  endif()
  get_property(include_dir GLOBAL PROPERTY QHOST_SDK_INCLUDE_DIR)
  get_property(map_file GLOBAL PROPERTY QHOST_SDK_MAP_FILE)
  if(QHOST_PLUGIN_INSTALL_DIR)
    set(install_dir "${QHOST_PLUGIN_INSTALL_DIR}")
  else()
    get_property(install_dir GLOBAL PROPERTY QHOST_PLUGIN_INSTALL_DIR)
  endif()

  set(target qhost-${name})
  add_library(${target} MODULE ${arg_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "qhost-${name}" SUFFIX ".so"
    C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
    # Only qhost_plugin_init is exported; the version script also hides the symbols of
    # statically linked dependencies, which visibility alone would not.
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${map_file}")
  # The SDK alone: a plugin that reaches for a host header fails to compile.
  target_include_directories(${target} PRIVATE "${include_dir}")
  # A plugin reaches the host only through the QhHostApi table, so an undefined symbol is
  # a bug found at link time instead of at dlopen.
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map_file}"
                      "LINKER:--no-undefined")
  if(arg_LINK_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${arg_LINK_LIBRARIES})
  endif()
  if(arg_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}")
  elseif(QHOST_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${QHOST_PLUGIN_OUTPUT_DIR}")
  endif()
  if(NOT arg_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${install_dir}")
  endif()
endfunction()
