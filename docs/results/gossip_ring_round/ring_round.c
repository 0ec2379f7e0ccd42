// One D-PSGD round on a ring, in plain MPI, with and without computation while it is in flight.
//
//   ring_round COMPUTE_MS POLL_US ROUNDS MODE [NO_SLOW_START_AFTER_IDLE]
//
// Every rank owns a message of 1,819,688 bytes (the cnn model) and, each round, posts the
// receives of its two ring neighbours' messages and sends its own to both, in segments of 1 MiB
// (as gossip's neighbour exchange does: each under Open MPI's TCP eager limit, which is set here
// as frugal sets it). Then it computes for COMPUTE_MS milliseconds (a loop on the CPU), calling
// MPI_Testall every POLL_US microseconds (0: no MPI call during the computation), then waits for
// the round. MODE 0: both neighbours at once (D-PSGD on a ring); 1: the right neighbour's
// message, waited for, then the left one's; 2: one way only (to the right, from the left);
// 3: one way, to the rank at distance 1 in even rounds and 2 in odd ones (D-PSGD on the one-peer
// exponential graph of 4), so each connection idles for a round between its uses. With a fifth
// argument 1, each rank first turns off TCP's slow start after idle in its network namespace
// (net.ipv4.tcp_slow_start_after_idle = 0; needs root; one rank per emulated host).
// Rank 0 prints the mean round time (from posting to completion) and the mean wait after the
// computation, the largest over the ranks, over rounds 3 to ROUNDS.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

enum { kBytes = 1819688, kSegment = 1 << 20, kTag = 7 };

// Posts the receive of the message from `from` into `buffer`, segment by segment.
static void PostRecv(int from, char* buffer, MPI_Request* requests, int* count) {
  for (size_t off = 0; off < kBytes; off += kSegment) {
    const int len = (int)(kBytes - off < kSegment ? kBytes - off : kSegment);
    MPI_Irecv(buffer + off, len, MPI_BYTE, from, kTag, MPI_COMM_WORLD, &requests[(*count)++]);
  }
}

// Posts the send of `message` to `to`, segment by segment.
static void PostSend(int to, const char* message, MPI_Request* requests, int* count) {
  for (size_t off = 0; off < kBytes; off += kSegment) {
    const int len = (int)(kBytes - off < kSegment ? kBytes - off : kSegment);
    MPI_Isend(message + off, len, MPI_BYTE, to, kTag, MPI_COMM_WORLD, &requests[(*count)++]);
  }
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: ring_round COMPUTE_MS POLL_US ROUNDS MODE [NO_SLOW_START_AFTER_IDLE]\n");
    return 2;
  }
  if (argc == 6 && atoi(argv[5]) == 1) {
    FILE* f = fopen("/proc/sys/net/ipv4/tcp_slow_start_after_idle", "w");
    if (f == NULL || fputs("0", f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "ring_round: cannot turn off tcp_slow_start_after_idle\n");
      return 2;
    }
  }
  setenv("OMPI_MCA_btl_tcp_eager_limit", "1114112", 0);
  setenv("OMPI_MCA_btl_tcp_max_send_size", "1114112", 0);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double compute_ms = atof(argv[1]);
  const int poll_us = atoi(argv[2]);
  const int rounds = atoi(argv[3]);
  const int mode = atoi(argv[4]);
  char* message = malloc(kBytes);
  char* received[2] = {malloc(kBytes), malloc(kBytes)};
  memset(message, 1, kBytes);
  const int left = (rank + size - 1) % size;
  const int right = (rank + 1) % size;
  MPI_Request requests[16];
  double round_sum = 0, wait_sum = 0;
  volatile double sink = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < rounds; ++k) {
    const double start = NowMs();
    int count = 0;
    if (mode == 0) {  // every receive, then every send, as the neighbour exchange posts them
      PostRecv(left, received[0], requests, &count);
      PostRecv(right, received[1], requests, &count);
      PostSend(left, message, requests, &count);
      PostSend(right, message, requests, &count);
    } else if (mode == 3) {
      const int distance = k % 2 == 0 ? 1 : 2;
      PostRecv((rank + size - distance) % size, received[0], requests, &count);
      PostSend((rank + distance) % size, message, requests, &count);
    } else {
      PostRecv(left, received[0], requests, &count);
      PostSend(right, message, requests, &count);
      if (mode == 1) {
        MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
        count = 0;
        PostRecv(right, received[1], requests, &count);
        PostSend(left, message, requests, &count);
      }
    }
    double last_poll = NowMs();
    int done = 0;
    while (NowMs() - start < compute_ms) {
      for (int z = 0; z < 1000; ++z) sink += z * 0.5;
      if (poll_us > 0 && !done && NowMs() - last_poll >= poll_us / 1000.0) {
        last_poll = NowMs();
        MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
      }
    }
    const double computed = NowMs();
    MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
    const double end = NowMs();
    if (k >= 3) {
      round_sum += end - start;
      wait_sum += end - computed;
    }
  }
  const double mine[2] = {round_sum / (rounds - 3), wait_sum / (rounds - 3)};
  double largest[2];
  MPI_Reduce(mine, largest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mode %d%s compute %.0f ms poll %d us: round %.1f ms, wait after the compute %.1f ms\n",
           mode, argc == 6 && atoi(argv[5]) == 1 ? " (no slow start after idle)" : "", compute_ms,
           poll_us, largest[0], largest[1]);
  }
  MPI_Finalize();
  return 0;
}
