/* What fake_nccl.c (the journal, init and teardown) and fake_nccl_data.c (collectives,
 * send/recv, groups, split/shrink, queries between processes) share. */
#pragma once
#include <stdatomic.h>
#include <stddef.h>

#define API __attribute__((visibility("default")))
typedef int result_t; /* ncclResult_t: 0 success, 1 unhandled cuda, 2 system, 4 invalid argument */
enum { kMagic = 0x6a6b6c6d };
typedef struct { char internal[128]; } unique_id_t;

struct fake_shared; /* one per communicator, in /dev/shm, mapped by each of its ranks */

typedef struct {
  int magic, rank, nRanks;
  unsigned long long id;
  int children; /* splits and shrinks so far: the same count on every rank */
  atomic_int inside;  /* calls running on it: destroy and abort wait for them to leave */
  atomic_int aborted; /* set by destroy and abort: the waits of calls inside give up */
  struct fake_shared* shared;
} fake_comm_t;

void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int mine(const void* comm);
void setLastError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* The communicator's shared region, mapped (and, once every rank has it, unlinked); 0 or an error. */
result_t attachShared(fake_comm_t* c);
void detachShared(fake_comm_t* c);
/* A fresh communicator of nRanks with this id and rank, attached. */
result_t makeComm(unsigned long long id, int rank, int nRanks, fake_comm_t** out);
