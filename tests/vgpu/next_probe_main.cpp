#include <cstdio>

extern "C" const char* hami_lookup_next();

int main() {
  std::printf("next=%s\n", hami_lookup_next());
  return 0;
}
