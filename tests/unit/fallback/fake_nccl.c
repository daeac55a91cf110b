/* A stand-in for the real libnccl.so.2, for CI machines without a GPU (where the real one
 * cannot make a communicator): the pnccl* functions braid's fallback calls, recording each
 * call so that tests/unit/fallback/fallback_route_test.cc and real_served_rank.cc can see which
 * library served what, with which handle and id, in which order. Its communicators carry a
 * magic word: a call given anything else (a braid handle) fails, so a test sees braid passing
 * the real handle. fake_nccl_data.c moves host-memory data between its ranks, also across
 * processes, so that a test can check the results of the calls it served. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nccl.h"

typedef struct { int nRanks, rank, stride; } team_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char journal[1 << 16];
static unsigned long long nextId = 0x1000; /* with the pid above it: unique across processes */
static result_t initResult = 0, asyncResult = 0;
static char lastError[256];
static void (*groupEndHook)(void);

void note(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&lock);
  if (strlen(journal) + strlen(line) + 2 < sizeof journal) {
    strcat(journal, line);
    strcat(journal, "\n");
  }
  pthread_mutex_unlock(&lock);
}

int mine(const void* comm) { return comm != NULL && ((const fake_comm_t*)comm)->magic == kMagic; }

void setLastError(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lastError, sizeof lastError, fmt, ap);
  va_end(ap);
}

/* For the test (found with dlopen(RTLD_NOLOAD) + dlsym). */
API const char* fakeNcclJournal(void) { return journal; }
API void fakeNcclClearJournal(void) { pthread_mutex_lock(&lock); journal[0] = 0; pthread_mutex_unlock(&lock); }
API void fakeNcclFailInit(result_t rc, const char* why) { initResult = rc; snprintf(lastError, sizeof lastError, "%s", why); }
API void fakeNcclSetAsyncError(result_t rc) { asyncResult = rc; }
API void fakeNcclOnGroupEnd(void (*hook)(void)) { groupEndHook = hook; }
API void fakeNcclSetLastError(const char* text) { setLastError("%s", text); }

API result_t pncclGetVersion(int* version) { *version = 22809; return 0; }
API const char* pncclGetLastError(void* comm) {
  if (mine(comm)) note("GetLastError id=%llx rank=%d", ((fake_comm_t*)comm)->id, ((fake_comm_t*)comm)->rank);
  return lastError;
}
API result_t pncclGetUniqueId(unique_id_t* id) {
  pthread_mutex_lock(&lock);
  unsigned long long v = ((unsigned long long)getpid() << 24) | nextId++;
  pthread_mutex_unlock(&lock);
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &v, sizeof v);
  note("GetUniqueId %llx", v);
  return 0;
}
API result_t pncclCommInitRankConfig(void** comm, int nRanks, unique_id_t id, int rank, void* config) {
  unsigned long long v;
  memcpy(&v, id.internal, sizeof v);
  (void)config;
  note("CommInitRankConfig id=%llx rank=%d nranks=%d", v, rank, nRanks);
  if (initResult != 0) return initResult;
  return makeComm(v, rank, nRanks, (fake_comm_t**)comm);
}
static result_t closeComm(void* comm, const char* how) {
  if (!mine(comm)) return 4;
  fake_comm_t* c = comm;
  note("%s id=%llx rank=%d", how, c->id, c->rank);
  if (strcmp(how, "CommFinalize") == 0) return 0;
  c->magic = 0;
  atomic_store(&c->aborted, 1);
  /* A call of another thread inside it (blocked in a wait) returns within a few ms; bounded.
   * (A call that passed mine() but has not yet counted itself is not seen: test code.) */
  for (int i = 0; i < 10000 && atomic_load(&c->inside) > 0; ++i) usleep(1000);
  detachShared(c);
  free(c);
  return 0;
}
API result_t pncclCommDestroy(void* comm) { return closeComm(comm, "CommDestroy"); }
API result_t pncclCommAbort(void* comm) { return closeComm(comm, "CommAbort"); }
API result_t pncclCommFinalize(void* comm) { return closeComm(comm, "CommFinalize"); }
API result_t pncclCommGetAsyncError(void* comm, result_t* out) {
  if (!mine(comm)) return 4;
  note("GetAsyncError id=%llx rank=%d", ((fake_comm_t*)comm)->id, ((fake_comm_t*)comm)->rank);
  *out = asyncResult;
  return 0;
}
/* As in libnccl.so.2, a weak public name aliases the strong one, and the library calls it
 * through its PLT (NCCL's enqueue checks ask ncclCommGetAsyncError about their communicator).
 * Loaded by the program before braid, without RTLD_DEEPBIND (PyTorch preloads libnccl.so.2),
 * that call binds to braid's export, which must send it back here. */
API result_t ncclCommGetAsyncError(void* comm, result_t* out) __attribute__((weak, alias("pncclCommGetAsyncError")));

/* fake_nccl_data.c: the group's queued calls. */
void groupOpen(void);
result_t groupClose(void);
API result_t pncclGroupStart(void) {
  note("GroupStart");
  groupOpen();
  return 0;
}
API result_t pncclGroupEnd(void) {
  if (groupEndHook) groupEndHook();
  result_t rc = groupClose();
  note("GroupEnd");
  return rc;
}
API result_t pncclDevCommCreate(void* comm, const void* reqs, void* out) {
  (void)reqs;
  if (!mine(comm)) { snprintf(lastError, sizeof lastError, "fake: not my communicator"); return 4; }
  result_t state = 0;
  if (ncclCommGetAsyncError(comm, &state) != 0) {
    snprintf(lastError, sizeof lastError, "fake: ncclCommGetAsyncError on my own communicator failed");
    return 4;
  }
  fake_comm_t* c = comm;
  note("DevCommCreate id=%llx rank=%d", c->id, c->rank);
  if (out) memcpy(out, &c->id, sizeof c->id);
  return 0;
}
API result_t pncclDevCommDestroy(void* comm, const void* dev) {
  (void)dev;
  if (!mine(comm)) return 4;
  note("DevCommDestroy rank=%d", ((fake_comm_t*)comm)->rank);
  return 0;
}
API team_t pncclTeamWorld(void* comm) {
  team_t t = {0, 0, 0};
  if (mine(comm)) { t.nRanks = ((fake_comm_t*)comm)->nRanks; t.rank = ((fake_comm_t*)comm)->rank; t.stride = 1; }
  return t;
}
API int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) { note("LLA2ACalcSlots %d %d", maxElts, maxEltSize); return 42; }
