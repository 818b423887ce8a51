// Boost.JSON compiled into the fuzz binaries (header-only mode), so the
// parser's JSON library is instrumented too and no prebuilt library is linked.
#include <boost/json/src.hpp>
