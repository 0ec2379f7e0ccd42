// Point-to-point exchange, as a gossip round makes it: how long a message takes when rank 0 only
// sends, only receives, or sends and receives at once (gossip's neighbour exchange, every message
// in flight together). On 2 ranks this is one link: on a full-duplex link the three take about the
// same time; on a link whose directions take turns, sending and receiving at once takes as long
// as the two one-way transfers together. On more ranks rank 0 exchanges with all the others at
// once, as a parameter server with its workers: its NIC carries one flow per peer in each
// direction (`frugal simulate --fit-duplex` takes the share each direction keeps from it).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::bench {

// Seen from rank 0: kSend, rank 0 sends to every other rank; kRecv, every other rank sends to
// rank 0; kBoth, both at the same time.
enum class ExchangeMode { kSend, kRecv, kBoth };

// "send", "recv", "both"; kInvalidArgument otherwise.
StatusOr<ExchangeMode> ParseExchangeMode(std::string_view name);
std::string_view ExchangeModeName(ExchangeMode mode);

struct ExchangeBenchOptions {
  std::vector<size_t> sizes;  // message sizes in bytes (each of rank 0's messages)
  std::vector<ExchangeMode> modes = {ExchangeMode::kSend, ExchangeMode::kRecv, ExchangeMode::kBoth};
  int iters = 5;   // timed exchanges per size and mode
  int warmup = 1;  // untimed ones before them
  Duration timeout = kDefaultTimeout;
};

struct ExchangeSample {
  size_t bytes = 0;
  int peers = 1;  // rank 0's peers: ranks - 1
  ExchangeMode mode = ExchangeMode::kSend;
  // Median over the timed exchanges of the slower rank's time from a common start (a barrier) to
  // the end of its exchange; fastest and slowest exchange besides.
  double seconds = 0;
  double fastest_seconds = 0;
  double slowest_seconds = 0;
  int iters = 0;
};

// Collective over a transport of at least 2 ranks (kInvalidArgument otherwise): all call it with
// the same options. Each exchange is one round of gossip's NeighbourExchange. The samples are
// complete on rank 0; rank 1 gets an empty vector.
StatusOr<std::vector<ExchangeSample>> RunExchangeBench(Transport& t,
                                                       const ExchangeBenchOptions& options);

// One row per size and mode, with rank 0's rate per direction (all its peers' messages) and, for
// kBoth, its time over the slower of the one-way times of the same size (1.0: full duplex; 2.0:
// the directions take turns).
std::string ExchangeTable(const std::vector<ExchangeSample>& samples);
std::vector<nlohmann::json> ExchangeJson(const std::vector<ExchangeSample>& samples);

}  // namespace frugal::bench
