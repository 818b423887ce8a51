# Compiler flags shared by every target of the project.
add_library(pensieve_options INTERFACE)
target_compile_options(pensieve_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>)
# GCC 12 false positives: its AVX-512 intrinsic headers trip
# -W(maybe-)uninitialized on their own `__Y = __Y` placeholders (GCC bug
# 105593), std::string copies at -O3 trip -Wrestrict (GCC bug 105329), and
# Asio coroutine frames inlined under ASan trip -Wmismatched-new-delete. All
# fixed in GCC 13; ASan/UBSan check the real cases at run time.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(pensieve_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized -Wno-uninitialized -Wno-restrict -Wno-mismatched-new-delete>)
endif()
if(PENSIEVE_WERROR)
  target_compile_options(pensieve_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(PENSIEVE_NATIVE)
  target_compile_options(pensieve_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
target_include_directories(pensieve_options INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
# Coroutines frames are allocated per call; asio needs this for awaitable operators.
target_compile_definitions(pensieve_options INTERFACE BOOST_ASIO_NO_DEPRECATED)

if(PENSIEVE_SANITIZE)
  message(STATUS "pensieve: sanitizers ${PENSIEVE_SANITIZE}")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${PENSIEVE_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${PENSIEVE_SANITIZE})
  if(PENSIEVE_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 warns (-Wtsan) on every Asio handler: TSan does not model the
    # fences Asio adds; its handoffs are mutex-ordered, which TSan does see.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>)
  endif()
endif()
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo)
endif()
