/* An NCCL from before braid's ABI, as far as the version check can tell: 2.27.3. */
typedef enum { ok = 0 } result_t;
__attribute__((visibility("default"))) result_t pncclGetVersion(int* version) {
  *version = 22703;
  return ok;
}
