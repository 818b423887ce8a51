# Writes the web page's files (DIR, every file in it) into a C++ source
# (OUT) that defines pensieve::net::web_assets(): byte arrays, so the page
# needs no build step and no files at run time. Run as a script:
#   cmake -DDIR=net/web -DOUT=web_assets_data.cpp -P net/embed_web_assets.cmake
file(GLOB names RELATIVE ${DIR} ${DIR}/*)
list(SORT names)
set(arrays "")
set(table "")
set(index 0)
foreach(name ${names})
  if(IS_DIRECTORY ${DIR}/${name})
    continue()
  endif()
  file(READ ${DIR}/${name} hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # A trailing 0 keeps empty files legal arrays; `size` leaves it out.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x..,){24})" "\\1\n    " bytes "${bytes}")
  string(APPEND arrays "const unsigned char asset_${index}[] = {\n    ${bytes}0};\n")
  get_filename_component(ext ${name} LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js" OR ext STREQUAL ".mjs")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".json")
    set(type "application/json")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL ".png")
    set(type "image/png")
  elseif(ext STREQUAL ".ico")
    set(type "image/x-icon")
  else()
    set(type "application/octet-stream")
  endif()
  string(APPEND table "      {\"/${name}\", \"${type}\", bytes(asset_${index}, ${size})},\n")
  math(EXPR index "${index} + 1")
endforeach()
set(content "// Generated from net/web/ by net/embed_web_assets.cmake: do not edit.
#include \"net/web_assets.hpp\"

#include <cstddef>

namespace pensieve::net {

namespace {

${arrays}
std::string_view bytes(const unsigned char* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace

std::span<const WebAsset> web_assets() {
  static const WebAsset assets[] = {
${table}  };
  return assets;
}

}  // namespace pensieve::net
")
# Rewrite only on change, so a reconfigure does not rebuild the library.
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
