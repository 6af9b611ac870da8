# Writes <build>/gen/retryd/v1/config_defaults.h from config.proto: each
# number field's declared default (its `(bounds)` option's default_value)
# as a C++ constant, so that code kept free of protobuf (the engine's
# EngineOptions) takes its defaults from the one place the config loader
# reads them, instead of writing them again. Re-run when config.proto
# changes (CMAKE_CONFIGURE_DEPENDS).
#
# The proto's layout it reads: a top-level `message Name {` at column 0,
# and a field with its option on one line,
#   <type> <name> = <number> [(bounds) = { default_value: <value> ... }];
function(retryd_write_config_defaults proto out)
  file(STRINGS ${proto} lines)
  set(body "")
  set(message "")
  set(fields "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^message ([A-Za-z0-9_]+) {")
      if(NOT fields STREQUAL "")
        string(APPEND body "struct ${message} {\n${fields}};\n\n")
      endif()
      set(message ${CMAKE_MATCH_1})
      set(fields "")
    elseif(line MATCHES "^  [a-z0-9_ ]+ ([a-z0-9_]+) = [0-9]+ \\[\\(bounds\\) = { default_value: ([0-9]+)")
      string(APPEND fields "  static constexpr uint64_t ${CMAKE_MATCH_1} = ${CMAKE_MATCH_2};\n")
    endif()
  endforeach()
  if(NOT fields STREQUAL "")
    string(APPEND body "struct ${message} {\n${fields}};\n\n")
  endif()
  if(body STREQUAL "")
    message(FATAL_ERROR "${proto}: no (bounds) default_value found")
  endif()
  set(text "// Generated from retryd/v1/config.proto by proto/config_defaults.cmake: do\n")
  string(APPEND text "// not edit. Each number field's (bounds) default_value, by message.\n")
  string(APPEND text "#ifndef RETRYD_V1_CONFIG_DEFAULTS_H_\n#define RETRYD_V1_CONFIG_DEFAULTS_H_\n\n")
  string(APPEND text "#include <cstdint>\n\nnamespace retryd::v1::config_defaults {\n\n")
  string(APPEND text "${body}}  // namespace retryd::v1::config_defaults\n\n")
  string(APPEND text "#endif  // RETRYD_V1_CONFIG_DEFAULTS_H_\n")
  # Unchanged text leaves the file (and what includes it) untouched.
  file(CONFIGURE OUTPUT ${out} CONTENT "${text}")
endfunction()
