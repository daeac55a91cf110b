/* The Open MPI side of compare-mpi.sh: MPI_Allreduce (float, sum, out of place) timed the way
 * braid-perf times a host all-reduce, printed in braid-perf's table layout so that one parser
 * reads both.
 *
 *   mpirun -np N mpi_allreduce_bench [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]
 *
 * Sizes are plain byte counts. Per size: warm-up calls, a barrier, ITERS timed calls; the time
 * is the mean over ranks of each rank's time per call (braid-perf's default, -a 1). After the
 * timed calls, one call on known inputs is checked; a wrong result fails the run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_long(const char* text, const char* flag) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0) {
    fprintf(stderr, "mpi_allreduce_bench: bad value '%s' for %s\n", text, flag);
    exit(2);
  }
  return value;
}

static int check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "mpi_allreduce_bench: %s failed (%d)\n", call, rc);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  return rc;
}

int main(int argc, char** argv) {
  long min_bytes = 8, max_bytes = 64L << 20, factor = 2, iters = 20, warmup = 5;
  check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) min_bytes = parse_long(argv[i + 1], "-b");
    else if (!strcmp(argv[i], "-e")) max_bytes = parse_long(argv[i + 1], "-e");
    else if (!strcmp(argv[i], "-f")) factor = parse_long(argv[i + 1], "-f");
    else if (!strcmp(argv[i], "-n")) iters = parse_long(argv[i + 1], "-n");
    else if (!strcmp(argv[i], "-w")) warmup = parse_long(argv[i + 1], "-w");
    else {
      fprintf(stderr, "mpi_allreduce_bench: unknown flag %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (factor < 2 || iters < 1 || min_bytes < 4 || min_bytes > max_bytes) {
    fprintf(stderr, "mpi_allreduce_bench: need -f >= 2, -n >= 1, 4 <= -b <= -e\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank, nranks;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
  size_t max_count = (size_t)max_bytes / sizeof(float);
  float* send = malloc(max_count * sizeof(float) + 64);
  float* recv = malloc(max_count * sizeof(float) + 64);
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce_bench: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  for (size_t i = 0; i < max_count; ++i) send[i] = (float)(rank + 1);
  if (rank == 0) {
    printf("# mpi_allreduce_bench: MPI_Allreduce float sum, %d ranks, iters %ld warmup %ld\n", nranks, iters, warmup);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time",
           "algbw", "busbw", "#wrong");
  }
  int failed = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    int count = (int)(bytes / (long)sizeof(float));
    for (long i = 0; i < warmup; ++i)
      check_mpi(MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double start = MPI_Wtime();
    for (long i = 0; i < iters; ++i)
      check_mpi(MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    double seconds = (MPI_Wtime() - start) / (double)iters, total = 0;
    check_mpi(MPI_Allreduce(&seconds, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    seconds = total / nranks;
    /* Every element must be 1 + 2 + ... + nranks. */
    float expected = (float)nranks * (float)(nranks + 1) / 2.0f;
    long wrong = 0, all_wrong = 0;
    for (int i = 0; i < count; ++i) wrong += recv[i] != expected;
    check_mpi(MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    failed |= all_wrong != 0;
    double algbw = seconds > 0 ? (double)count * sizeof(float) / 1e9 / seconds : 0;
    double busbw = algbw * 2.0 * (nranks - 1) / nranks;
    if (rank == 0)
      printf("%12ld  %12d  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6ld\n", (long)count * (long)sizeof(float), count, "float",
             "sum", -1, seconds * 1e6, algbw, busbw, all_wrong);
  }
  fflush(stdout);
  free(send);
  free(recv);
  MPI_Finalize();
  return failed ? 1 : 0;
}
