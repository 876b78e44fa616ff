// The "next" definition of hami_next_fn after next_probe's own.
extern "C" __attribute__((visibility("default"))) const char* hami_next_fn() {
  return "target";
}
