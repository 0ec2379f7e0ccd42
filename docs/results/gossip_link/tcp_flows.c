// Plain TCP flows between emulated hosts, in the patterns of a gossip round, without MPI on the
// data path (MPI only starts the ranks, places them and runs the barriers).
//
//   tcp_flows PATTERN BYTES ROUNDS [lockstep|free [SETUP_SCRIPT]]
//
// One rank per emulated host; rank r's address is 10.213.0.(r+1). Every pair of ranks that a
// pattern uses gets one TCP connection (both directions on it, as Open MPI's TCP transport
// does). A round: each rank writes BYTES to each of the round's destinations and reads BYTES
// from each of its sources, all at once (non-blocking sockets and poll(), so a waiting rank
// sleeps instead of spinning). `lockstep` puts a barrier before every round; `free` lets each
// rank start its next round when its own has finished, as D-PSGD does. Patterns (n ranks):
//   one      0 -> 1
//   fanout   0 -> 1 and 0 -> 2 (two flows out of one host)
//   fanin    1 -> 0 and 2 -> 0 (two flows into one host)
//   duplex   0 -> 1 and 1 -> 0 (one connection, both directions)
//   ring1    i -> i+1 (one flow out of and one into every host)
//   ring2    i -> i+1 and i -> i-1 (D-PSGD on a ring: two out, two in)
//   onepeer  i -> i+2^(k mod log2 n) in round k (the one-peer exponential graph)
//   fixed2   i -> i+2 every round (one of onepeer's two rounds, repeated)
// Rank 0 prints one line: the mean and median over rounds 2..ROUNDS of the slowest rank's round,
// the same over the whole run (wall time / rounds), the round's bytes per host and direction
// over the NIC rate, and the sums over the ranks of the TCP counters of each host's network
// namespace (/proc/net/snmp, /proc/net/netstat) between the first and the last round:
// segments retransmitted, retransmission timeouts, tail-loss probes, fast retransmits; then the
// packets the token buckets dropped over the whole run (all rounds), on the hosts' eth0
// (what a host sends) and on the bridge ports (what a host receives).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kPort = 47123, kMaxRanks = 16, kMaxRounds = 1000 };

static double NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void Die(const char* what) {
  fprintf(stderr, "tcp_flows: %s: %s\n", what, strerror(errno));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Destinations of `rank` in round `k`; returns their number.
static int Destinations(const char* pattern, int rank, int n, int k, int* out) {
  int count = 0;
  if (strcmp(pattern, "one") == 0) {
    if (rank == 0) out[count++] = 1;
  } else if (strcmp(pattern, "fanout") == 0) {
    if (rank == 0) {
      out[count++] = 1;
      out[count++] = 2;
    }
  } else if (strcmp(pattern, "fanin") == 0) {
    if (rank == 1 || rank == 2) out[count++] = 0;
  } else if (strcmp(pattern, "duplex") == 0) {
    if (rank < 2) out[count++] = 1 - rank;
  } else if (strcmp(pattern, "ring1") == 0) {
    out[count++] = (rank + 1) % n;
  } else if (strcmp(pattern, "ring2") == 0) {
    out[count++] = (rank + 1) % n;
    out[count++] = (rank + n - 1) % n;
  } else if (strcmp(pattern, "onepeer") == 0) {
    int log2n = 0;
    while ((1 << (log2n + 1)) <= n) ++log2n;
    out[count++] = (rank + (1 << (k % log2n))) % n;
  } else if (strcmp(pattern, "fixed2") == 0) {
    out[count++] = (rank + 2) % n;
  } else {
    return -1;
  }
  return count;
}

// Sources of `rank` in round `k` (the ranks whose destinations include it).
static int Sources(const char* pattern, int rank, int n, int k, int* out) {
  int count = 0;
  for (int s = 0; s < n; ++s) {
    int dest[kMaxRanks];
    const int d = Destinations(pattern, s, n, k, dest);
    for (int i = 0; i < d; ++i)
      if (dest[i] == rank) out[count++] = s;
  }
  return count;
}

// Adds the values of the named TCP counters of this network namespace to `values`.
static void ReadCounters(const char* path, const char* const* names, int count, double* values) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  static char header[16384], line[16384];
  while (fgets(header, sizeof header, f) != NULL && fgets(line, sizeof line, f) != NULL) {
    char *hs, *ls;
    char* h = strtok_r(header, " \n", &hs);
    char* v = strtok_r(line, " \n", &ls);
    if (h == NULL || v == NULL) continue;
    while ((h = strtok_r(NULL, " \n", &hs)) != NULL && (v = strtok_r(NULL, " \n", &ls)) != NULL)
      for (int i = 0; i < count; ++i)
        if (strcmp(h, names[i]) == 0) values[i] += atof(v);
  }
  fclose(f);
}

enum { kCounters = 4 };
static const char* const kSnmp[] = {"RetransSegs"};
static const char* const kNetstat[] = {"TCPTimeouts", "TCPLossProbes", "TCPFastRetrans"};

static void Counters(double* values) {
  memset(values, 0, sizeof(double) * kCounters);
  ReadCounters("/proc/net/snmp", kSnmp, 1, values);
  ReadCounters("/proc/net/netstat", kNetstat, 3, values + 1);
}

// Sum of the "dropped N" figures that `command` (a `tc -s qdisc show`) prints.
static double Dropped(const char* command) {
  FILE* f = popen(command, "r");
  if (f == NULL) return -1;
  double total = 0;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    const char* d = strstr(line, "dropped ");
    if (d != NULL) total += atof(d + 8);
  }
  pclose(f);
  return total;
}

static int CompareDoubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4 || n > kMaxRanks || atoi(argv[3]) < 3 || atoi(argv[3]) > kMaxRounds) {
    if (rank == 0) fprintf(stderr, "usage: tcp_flows PATTERN BYTES ROUNDS [lockstep|free [SETUP_SCRIPT]]\n");
    MPI_Finalize();
    return 2;
  }
  const char* pattern = argv[1];
  const long bytes = atol(argv[2]);
  const int rounds = atoi(argv[3]);
  const int lockstep = argc < 5 || strcmp(argv[4], "free") != 0;
  int probe[kMaxRanks];
  if (Destinations(pattern, 0, n, 0, probe) < 0) {
    if (rank == 0) fprintf(stderr, "tcp_flows: unknown pattern %s\n", pattern);
    MPI_Finalize();
    return 2;
  }

  // Which peers this rank talks to in any round: one connection per pair.
  int peer_used[kMaxRanks] = {0};
  for (int k = 0; k < rounds; ++k) {
    int peers[kMaxRanks];
    int d = Destinations(pattern, rank, n, k, peers);
    for (int i = 0; i < d; ++i) peer_used[peers[i]] = 1;
    d = Sources(pattern, rank, n, k, peers);
    for (int i = 0; i < d; ++i) peer_used[peers[i]] = 1;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(kPort)};
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0) Die("bind");
  if (listen(listener, kMaxRanks) != 0) Die("listen");
  // SETUP_SCRIPT: a shell script that rank 0 runs before any connection is made (to change the
  // token buckets of the emulated hosts for an experiment).
  if (rank == 0 && argc > 5) {
    char command[4096];
    snprintf(command, sizeof command, "sh %s", argv[5]);
    if (system(command) != 0) Die(argv[5]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int sock[kMaxRanks];
  for (int p = 0; p < n; ++p) sock[p] = -1;
  // The higher rank of a pair connects, the lower one accepts.
  for (int p = 0; p < rank; ++p) {
    if (!peer_used[p]) continue;
    sock[p] = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(kPort)};
    char ip[32];
    snprintf(ip, sizeof ip, "10.213.0.%d", p + 1);
    inet_pton(AF_INET, ip, &to.sin_addr);
    if (connect(sock[p], (struct sockaddr*)&to, sizeof to) != 0) Die("connect");
    if (write(sock[p], &rank, sizeof rank) != sizeof rank) Die("write");
  }
  for (int p = rank + 1; p < n; ++p) {
    if (!peer_used[p]) continue;
    const int s = accept(listener, NULL, NULL);
    int from = -1;
    if (s < 0 || read(s, &from, sizeof from) != sizeof from || from <= rank || from >= n)
      Die("accept");
    sock[from] = s;
  }
  for (int p = 0; p < n; ++p) {
    if (sock[p] < 0) continue;
    setsockopt(sock[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(sock[p], F_SETFL, fcntl(sock[p], F_GETFL) | O_NONBLOCK);
  }

  char* out = malloc(bytes);
  char* in = malloc(bytes);
  memset(out, rank + 1, bytes);
  double round_ms[kMaxRounds];
  double before[kCounters], after[kCounters];
  double start_ms = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < rounds; ++k) {
    if (lockstep) MPI_Barrier(MPI_COMM_WORLD);
    if (k == 1) {
      Counters(before);
      start_ms = NowMs();
    }
    const double t0 = NowMs();
    int dest[kMaxRanks], src[kMaxRanks];
    const int nd = Destinations(pattern, rank, n, k, dest);
    const int ns = Sources(pattern, rank, n, k, src);
    long sent[kMaxRanks] = {0}, received[kMaxRanks] = {0};
    int open = nd + ns;
    while (open > 0) {
      struct pollfd fds[2 * kMaxRanks];
      int kind[2 * kMaxRanks], which[2 * kMaxRanks], count = 0;
      for (int i = 0; i < nd; ++i)
        if (sent[i] < bytes) {
          fds[count] = (struct pollfd){.fd = sock[dest[i]], .events = POLLOUT};
          kind[count] = 0, which[count++] = i;
        }
      for (int i = 0; i < ns; ++i)
        if (received[i] < bytes) {
          fds[count] = (struct pollfd){.fd = sock[src[i]], .events = POLLIN};
          kind[count] = 1, which[count++] = i;
        }
      if (poll(fds, count, 60000) <= 0) Die("poll");
      for (int j = 0; j < count; ++j) {
        if (fds[j].revents == 0) continue;
        const int i = which[j];
        if (kind[j] == 0) {
          const ssize_t w = write(fds[j].fd, out + sent[i], bytes - sent[i]);
          if (w < 0 && errno != EAGAIN) Die("write");
          if (w > 0 && (sent[i] += w) == bytes) --open;
        } else {
          const ssize_t r = read(fds[j].fd, in + received[i], bytes - received[i]);
          if (r == 0 || (r < 0 && errno != EAGAIN)) Die("read");
          if (r > 0 && (received[i] += r) == bytes) --open;
        }
      }
    }
    round_ms[k] = NowMs() - t0;
  }
  const double total_ms = NowMs() - start_ms;
  Counters(after);
  for (int i = 0; i < kCounters; ++i) after[i] -= before[i];

  const double up_dropped = Dropped("tc -s qdisc show dev eth0"), down_dropped = rank == 0 ? Dropped(
      "for ns in $(ip netns list | awk '$1 ~ /-c$/ {print $1}'); do ip netns exec $ns tc -s "
      "qdisc show; done") : 0;
  double slowest[kMaxRounds], counters[kCounters], total_max, up_total;
  MPI_Reduce(&up_dropped, &up_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(round_ms, slowest, rounds, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(after, counters, kCounters, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&total_ms, &total_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const int m = rounds - 1;
    double mean = 0;
    for (int k = 1; k < rounds; ++k) mean += slowest[k] / m;
    qsort(slowest + 1, m, sizeof(double), CompareDoubles);
    const double median = slowest[1 + m / 2];
    printf("pattern %s %s bytes %ld rounds %d: round mean %.1f ms median %.1f ms max %.1f ms, "
           "wall/round %.1f ms; retrans %.0f timeouts %.0f tlp %.0f fastretrans %.0f; dropped up %.0f "
           "down %.0f\n",
           pattern, lockstep ? "lockstep" : "free", bytes, m, mean, median, slowest[rounds - 1],
           total_max / m, counters[0], counters[1], counters[2], counters[3], up_total, down_dropped);
  }
  for (int p = 0; p < n; ++p)
    if (sock[p] >= 0) close(sock[p]);
  close(listener);
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
