/* The stand-in NCCL's data path, for host memory: its ranks (threads or processes) meet in one
 * shared region per communicator (/dev/shm, unlinked once every rank has mapped it). A
 * collective is one exchange: every rank puts its input in its slot, a barrier, every rank
 * computes its output from all slots, a barrier. Send/recv go through a small queue per
 * (sender, receiver). Inside a group the calls wait for pncclGroupEnd, which runs the sends,
 * then the collectives in order, then the receives. Sizes are small and bounded (kSlotBytes);
 * every wait gives up after kWaitSeconds with an error. Test code: a few types and ops only. */
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"

enum { kMaxRanks = 4, kSlotBytes = 64 << 10, kDepth = 4, kMsgBytes = 16 << 10, kWaitSeconds = 30, kMaxQueued = 64 };
enum { opSum = 0, opMax = 2 };                          /* ncclRedOp_t values */
enum { tInt32 = 2, tFloat32 = 7 };                      /* the reducible ncclDataType_t values */
static const size_t kTypeBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
enum Coll { cAllReduce, cBroadcast, cReduce, cAllGather, cReduceScatter, cAlltoAll, cSend, cRecv };
static const char* const kCollName[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Send", "Recv"};

typedef struct {
  atomic_int head, tail; /* messages taken, messages put */
  size_t bytes[kDepth];
  char data[kDepth][kMsgBytes];
} mailbox_t;

struct fake_shared {
  atomic_int arrived, generation;
  char slot[kMaxRanks][kSlotBytes];
  mailbox_t box[kMaxRanks][kMaxRanks]; /* [sender][receiver] */
};

typedef struct {
  enum Coll coll;
  const void* send;
  void* recv;
  size_t count;
  int type, op, peer; /* peer: root or send/recv peer */
  fake_comm_t* comm;
} call_t;

static __thread int groupDepth;
static __thread int nQueued;
static __thread call_t queued[kMaxQueued];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void shmName(unsigned long long id, char* name, size_t n) { snprintf(name, n, "/fake-nccl-%llx", id); }

static result_t barrier(fake_comm_t* c) {
  struct fake_shared* s = c->shared;
  int gen = atomic_load(&s->generation);
  if (atomic_fetch_add(&s->arrived, 1) == c->nRanks - 1) {
    atomic_store(&s->arrived, 0);
    atomic_fetch_add(&s->generation, 1);
    return 0;
  }
  double until = now() + kWaitSeconds;
  while (atomic_load(&s->generation) == gen) {
    if (atomic_load(&c->aborted)) {
      setLastError("fake: rank %d: the communicator was aborted during a collective", c->rank);
      return 6; /* ncclRemoteError */
    }
    if (now() > until) {
      setLastError("fake: rank %d waited %d s for the others at a barrier", c->rank, kWaitSeconds);
      return 2;
    }
    sched_yield();
  }
  return 0;
}

result_t attachShared(fake_comm_t* c) {
  char name[64];
  shmName(c->id, name, sizeof name);
  int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
  if (fd < 0) { setLastError("fake: shm_open(%s) failed", name); return 2; }
  if (ftruncate(fd, sizeof(struct fake_shared)) != 0) {
    close(fd);
    setLastError("fake: ftruncate(%s) failed", name);
    return 2;
  }
  void* at = mmap(NULL, sizeof(struct fake_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (at == MAP_FAILED) { setLastError("fake: mmap(%s) failed", name); return 2; }
  c->shared = at;
  result_t rc = barrier(c); /* every rank has it mapped: the name can go */
  if (c->rank == 0) shm_unlink(name);
  return rc;
}

void detachShared(fake_comm_t* c) {
  if (c->shared) munmap(c->shared, sizeof(struct fake_shared));
  c->shared = NULL;
}

result_t makeComm(unsigned long long id, int rank, int nRanks, fake_comm_t** out) {
  *out = NULL;
  if (nRanks > kMaxRanks || rank < 0 || rank >= nRanks) {
    setLastError("fake: %d ranks (at most %d), rank %d", nRanks, kMaxRanks, rank);
    return 4;
  }
  fake_comm_t* c = calloc(1, sizeof *c);
  c->magic = kMagic; c->rank = rank; c->nRanks = nRanks; c->id = id;
  result_t rc = attachShared(c);
  if (rc != 0) { detachShared(c); free(c); return rc; }
  *out = c;
  return 0;
}

static void reduceInto(void* acc, const void* in, size_t count, int type, int op) {
  for (size_t i = 0; i < count; ++i) {
    if (type == tInt32) {
      int32_t* a = (int32_t*)acc + i; int32_t b = ((const int32_t*)in)[i];
      *a = op == opMax ? (*a > b ? *a : b) : *a + b;
    } else {
      float* a = (float*)acc + i; float b = ((const float*)in)[i];
      *a = op == opMax ? (*a > b ? *a : b) : *a + b;
    }
  }
}

/* One exchange: in (inBytes) to this rank's slot; out (outBytes) computed from all slots. */
static result_t collective(const call_t* k) {
  fake_comm_t* c = k->comm;
  struct fake_shared* s = c->shared;
  const int n = c->nRanks, me = c->rank;
  const size_t eb = kTypeBytes[k->type], bytes = k->count * eb;
  size_t inBytes = bytes, outBytes = bytes;
  if (k->coll == cAllGather) outBytes = bytes * n;
  if (k->coll == cReduceScatter || k->coll == cAlltoAll) inBytes = bytes * n;
  if (k->coll == cAlltoAll) outBytes = bytes * n;
  if (inBytes > kSlotBytes || outBytes > kSlotBytes) { setLastError("fake: %zu bytes is above its %d", inBytes, kSlotBytes); return 4; }
  int reduces = k->coll == cAllReduce || k->coll == cReduce || k->coll == cReduceScatter;
  if (reduces && ((k->type != tInt32 && k->type != tFloat32) || (k->op != opSum && k->op != opMax))) {
    setLastError("fake: reduces only int32/float32 with sum/max");
    return 4;
  }
  char* out = malloc(kSlotBytes);
  if (out == NULL) { setLastError("fake: out of memory"); return 2; }
  if (k->send) memcpy(s->slot[me], k->send, inBytes);
  result_t rc = barrier(c);
  if (rc != 0) { free(out); return rc; }
  switch (k->coll) {
    case cAllReduce:
    case cReduce:
      memcpy(out, s->slot[0], bytes);
      for (int r = 1; r < n; ++r) reduceInto(out, s->slot[r], k->count, k->type, k->op);
      break;
    case cReduceScatter:
      memcpy(out, s->slot[0] + me * bytes, bytes);
      for (int r = 1; r < n; ++r) reduceInto(out, s->slot[r] + me * bytes, k->count, k->type, k->op);
      break;
    case cBroadcast: memcpy(out, s->slot[k->peer], bytes); break;
    case cAllGather:
      for (int r = 0; r < n; ++r) memcpy(out + r * bytes, s->slot[r], bytes);
      break;
    case cAlltoAll:
      for (int r = 0; r < n; ++r) memcpy(out + r * bytes, s->slot[r] + me * bytes, bytes);
      break;
    default: break;
  }
  rc = barrier(c); /* nobody writes a slot again before everyone has read */
  if (rc == 0 && (k->coll != cReduce || me == k->peer)) memcpy(k->recv, out, outBytes);
  free(out);
  return rc;
}

/* Waits until the queue has room (`room`) or a message; bounded. */
static result_t waitQueue(fake_comm_t* c, mailbox_t* b, int room) {
  const int rank = c->rank;
  double until = now() + kWaitSeconds;
  for (;;) {
    int used = atomic_load(&b->tail) - atomic_load(&b->head);
    if (room ? used < kDepth : used > 0) return 0;
    if (atomic_load(&c->aborted)) {
      setLastError("fake: rank %d: the communicator was aborted during a send/recv", rank);
      return 6;
    }
    if (now() > until) {
      setLastError("fake: rank %d waited %d s for %s", rank, kWaitSeconds, room ? "room to send" : "a message");
      return 2;
    }
    sched_yield();
  }
}

static result_t pointToPoint(const call_t* k) {
  fake_comm_t* c = k->comm;
  const size_t bytes = k->count * kTypeBytes[k->type];
  if (bytes > kMsgBytes || k->peer < 0 || k->peer >= c->nRanks) { setLastError("fake: send/recv of %zu bytes to %d", bytes, k->peer); return 4; }
  if (k->coll == cSend) {
    mailbox_t* b = &c->shared->box[c->rank][k->peer];
    result_t rc = waitQueue(c, b, 1);
    if (rc != 0) return rc;
    int tail = atomic_load(&b->tail);
    memcpy(b->data[tail % kDepth], k->send, bytes);
    b->bytes[tail % kDepth] = bytes;
    atomic_store(&b->tail, tail + 1);
    return 0;
  }
  mailbox_t* b = &c->shared->box[k->peer][c->rank];
  result_t rc = waitQueue(c, b, 0);
  if (rc != 0) return rc;
  int head = atomic_load(&b->head);
  memcpy(k->recv, b->data[head % kDepth], b->bytes[head % kDepth] < bytes ? b->bytes[head % kDepth] : bytes);
  atomic_store(&b->head, head + 1);
  return 0;
}

static result_t run(const call_t* k) {
  atomic_fetch_add(&k->comm->inside, 1);
  result_t rc = k->coll == cSend || k->coll == cRecv ? pointToPoint(k) : collective(k);
  atomic_fetch_sub(&k->comm->inside, 1);
  return rc;
}

static result_t submit(enum Coll coll, const void* send, void* recv, size_t count, int type, int op, int peer, void* comm) {
  if (!mine(comm)) { setLastError("fake: not my communicator"); return 4; }
  if (type < 0 || type >= (int)(sizeof kTypeBytes / sizeof kTypeBytes[0])) return 4;
  fake_comm_t* c = comm;
  note("%s id=%llx rank=%d count=%zu%s", kCollName[coll], c->id, c->rank, count, groupDepth > 0 ? " queued" : "");
  call_t k = {coll, send, recv, count, type, op, peer, c};
  if (groupDepth == 0) return run(&k);
  if (nQueued == kMaxQueued) { setLastError("fake: more than %d calls in a group", kMaxQueued); return 4; }
  queued[nQueued++] = k;
  return 0;
}

void groupOpen(void) { ++groupDepth; }

result_t groupClose(void) {
  if (groupDepth == 0) return 5; /* ncclInvalidUsage */
  if (--groupDepth > 0) return 0;
  result_t rc = 0;
  for (int phase = 0; phase < 3 && rc == 0; ++phase)
    for (int i = 0; i < nQueued && rc == 0; ++i) {
      enum Coll coll = queued[i].coll;
      int inPhase = phase == 0 ? coll == cSend : phase == 1 ? (coll != cSend && coll != cRecv) : coll == cRecv;
      if (inPhase) rc = run(&queued[i]);
    }
  nQueued = 0;
  return rc;
}

typedef void* stream_t;
API result_t pncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* comm, stream_t st) {
  (void)st; return submit(cAllReduce, s, r, n, t, op, 0, comm);
}
API result_t pncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, stream_t st) {
  (void)st; return submit(cBroadcast, s, r, n, t, opSum, root, comm);
}
API result_t pncclReduce(const void* s, void* r, size_t n, int t, int op, int root, void* comm, stream_t st) {
  (void)st; return submit(cReduce, s, r, n, t, op, root, comm);
}
API result_t pncclAllGather(const void* s, void* r, size_t n, int t, void* comm, stream_t st) {
  (void)st; return submit(cAllGather, s, r, n, t, opSum, 0, comm);
}
API result_t pncclReduceScatter(const void* s, void* r, size_t n, int t, int op, void* comm, stream_t st) {
  (void)st; return submit(cReduceScatter, s, r, n, t, op, 0, comm);
}
API result_t pncclAlltoAll(const void* s, void* r, size_t n, int t, void* comm, stream_t st) {
  (void)st; return submit(cAlltoAll, s, r, n, t, opSum, 0, comm);
}
API result_t pncclSend(const void* s, size_t n, int t, int peer, void* comm, stream_t st) {
  (void)st; return submit(cSend, s, NULL, n, t, opSum, peer, comm);
}
API result_t pncclRecv(void* r, size_t n, int t, int peer, void* comm, stream_t st) {
  (void)st; return submit(cRecv, NULL, r, n, t, opSum, peer, comm);
}

/* Queries and registration: answered from the fake's own communicator, journaled. */
static result_t query(void* comm, const char* what, int value, int* out) {
  if (!mine(comm) || out == NULL) return 4;
  note("%s id=%llx rank=%d", what, ((fake_comm_t*)comm)->id, ((fake_comm_t*)comm)->rank);
  *out = value;
  return 0;
}
API result_t pncclCommCount(void* comm, int* out) { return query(comm, "CommCount", mine(comm) ? ((fake_comm_t*)comm)->nRanks : 0, out); }
API result_t pncclCommUserRank(void* comm, int* out) { return query(comm, "CommUserRank", mine(comm) ? ((fake_comm_t*)comm)->rank : 0, out); }
API result_t pncclCommCuDevice(void* comm, int* out) { return query(comm, "CommCuDevice", -1, out); }
API result_t pncclCommRegister(void* comm, void* buff, size_t size, void** handle) {
  int unused;
  (void)buff; (void)size;
  if (query(comm, "CommRegister", 0, &unused) != 0 || handle == NULL) return 4;
  *handle = (char*)comm + 1; /* a handle the fake recognises */
  return 0;
}
API result_t pncclCommDeregister(void* comm, void* handle) {
  int unused;
  if (query(comm, "CommDeregister", 0, &unused) != 0 || handle != (char*)comm + 1) return 4;
  return 0;
}
API result_t pncclRedOpCreatePreMulSum(int* op, void* scalar, int type, int residence, void* comm) {
  (void)scalar; (void)type; (void)residence;
  if (op == NULL) return 4;
  return query(comm, "RedOpCreatePreMulSum", 77, op);
}
API result_t pncclRedOpDestroy(int op, void* comm) {
  int unused;
  return op == 77 ? query(comm, "RedOpDestroy", 0, &unused) : 4;
}

/* Split: (color, key) exchanged in the parent's region; the members ordered by (key, rank). */
API result_t pncclCommSplit(void* comm, int color, int key, void** newcomm, void* config) {
  (void)config;
  if (!mine(comm) || newcomm == NULL) return 4;
  fake_comm_t* c = comm;
  *newcomm = NULL;
  int mineKv[2] = {color, key}, all[kMaxRanks * 2];
  call_t k = {cAllGather, mineKv, all, 2, tInt32, opSum, 0, c};
  result_t rc = collective(&k);
  if (rc != 0) return rc;
  unsigned long long childId = c->id * 1000003ull + (unsigned long long)(++c->children) * 131ull + (unsigned)color;
  note("CommSplit id=%llx rank=%d color=%d", c->id, c->rank, color);
  if (color == -1) return 0; /* NCCL_SPLIT_NOCOLOR */
  int rank = 0, n = 0;
  for (int r = 0; r < c->nRanks; ++r) {
    if (all[2 * r] != color) continue;
    ++n;
    if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < c->rank)) ++rank;
  }
  return makeComm(childId, rank, n, (fake_comm_t**)newcomm);
}

/* Shrink: the ranks not excluded, in order; the excluded ones do not call. */
API result_t pncclCommShrink(void* comm, int* exclude, int nExclude, void** newcomm, void* config, int flags) {
  (void)config; (void)flags;
  if (!mine(comm) || newcomm == NULL) return 4;
  fake_comm_t* c = comm;
  int rank = 0, n = 0;
  for (int r = 0; r < c->nRanks; ++r) {
    int out = 0;
    for (int i = 0; i < nExclude; ++i) out |= exclude[i] == r;
    if (out) continue;
    if (r < c->rank) ++rank;
    ++n;
  }
  unsigned long long childId = c->id * 1000003ull + (unsigned long long)(++c->children) * 131ull + 99ull;
  note("CommShrink id=%llx rank=%d excluded=%d", c->id, c->rank, nExclude);
  return makeComm(childId, rank, n, (fake_comm_t**)newcomm);
}
