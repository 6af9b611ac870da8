# Writes OUT, a C++ source holding every file of DIR as a byte array and
# the table FindConsoleAsset reads (console_assets.h). Run by CMake with -P.
file(GLOB files RELATIVE ${DIR} ${DIR}/*)
list(SORT files)
set(arrays "")
set(table "")
set(index 0)
foreach(name ${files})
  if(IS_DIRECTORY ${DIR}/${name})
    continue()
  endif()
  file(READ ${DIR}/${name} hex HEX)
  string(LENGTH "${hex}" length)
  math(EXPR size "${length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  get_filename_component(ext ${name} LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL ".png")
    set(type "image/png")
  elseif(ext STREQUAL ".ico")
    set(type "image/x-icon")
  elseif(ext STREQUAL ".json")
    set(type "application/json")
  else()
    set(type "text/plain; charset=utf-8")
  endif()
  string(APPEND arrays "const unsigned char kAsset${index}[] = {${bytes}0};\n")
  string(APPEND table "    {\"${name}\", \"${type}\", std::string_view(reinterpret_cast<const char*>(kAsset${index}), ${size})},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE ${OUT}.tmp "// Written by server/http/console/embed_assets.cmake: do not edit.
#include <string_view>

#include \"server/http/console/console_assets.h\"

namespace retryd::console_assets {
namespace {
${arrays}}  // namespace

extern const ConsoleAsset kAssets[] = {
${table}    {\"\", \"\", std::string_view()},
};
extern const int kAssetCount = ${index};

}  // namespace retryd::console_assets
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
