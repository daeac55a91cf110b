/* The hazard the fallback avoids: the real NCCL dlopened without RTLD_DEEPBIND while braid is
 * in the global scope (LD_PRELOAD). Its calls to its own exported names then bind to braid's;
 * forwarding_test.sh checks that LD_DEBUG=bindings shows that here (so the check can fail). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  dlclose(h);
  return 0;
}
