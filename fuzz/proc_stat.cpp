// /proc/<pid>/stat text as the node agent and the library read it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "region/process_identity.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)hami::region::parse_proc_stat(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
