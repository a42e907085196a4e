// SHA-1 (FIPS 180-4), only to name Lua scripts for EVALSHA the way Redis does; not for security.
#pragma once

#include <string>
#include <string_view>

namespace spand {

std::string sha1_hex(std::string_view data);

}  // namespace spand
