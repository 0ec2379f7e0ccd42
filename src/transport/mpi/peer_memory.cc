// Memory shared by the MPI transport's ranks on one machine: see peer_memory.h.
#include "transport/mpi/peer_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

namespace frugal::mpi_internal {
namespace {

std::atomic<uint64_t> next_generation{1};

// A memfd of `capacity` bytes mapped here; nothing when the kernel refuses.
std::optional<MappableBlock> NewMemfdBlock(size_t capacity) {
  const int fd = memfd_create("frugal-shared", MFD_CLOEXEC);
  if (fd < 0) return std::nullopt;
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    close(fd);
    return std::nullopt;
  }
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return std::nullopt;
  }
  return MappableBlock{static_cast<std::byte*>(p), capacity, fd,
                       next_generation.fetch_add(1, std::memory_order_relaxed)};
}

// The one-page block every process offers to its peers as a probe, with its random value.
struct ProbeBlock {
  int fd = -1;
  uint64_t generation = 0;
  uint64_t value = 0;
};
const ProbeBlock& Probe() {
  static const ProbeBlock probe = [] {
    ProbeBlock b;
    std::optional<MappableBlock> block = NewMemfdBlock(static_cast<size_t>(sysconf(_SC_PAGESIZE)));
    if (!block) return b;
    b.fd = block->fd;
    b.generation = block->generation;
    b.value = std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
    std::memcpy(block->data, &b.value, sizeof(b.value));
    return b;  // the block stays mapped and open for the life of the process
  }();
  return probe;
}

uint64_t NetworkNamespace() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino) | (uint64_t{st.st_dev} << 40) | 1;
}

// Opens fd `fd` of process `pid` and maps `length` bytes of it read-only (0: its whole size).
StatusOr<std::pair<const std::byte*, size_t>> MapOf(int64_t pid, uint64_t fd, size_t length) {
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  const int local = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (local < 0) {
    return PeerLostError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(local, &st) != 0 || st.st_size <= 0) {
    close(local);
    return PeerLostError(fmt::format("{} has no size", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (length == 0) length = size;
  if (length > size) {
    close(local);
    return MalformedError(fmt::format("{} holds {} bytes, {} were asked", path, size, length));
  }
  void* p = mmap(nullptr, length, PROT_READ, MAP_SHARED, local, 0);
  close(local);
  if (p == MAP_FAILED) {
    return PeerLostError(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  }
  return std::pair<const std::byte*, size_t>(static_cast<const std::byte*>(p), length);
}

}  // namespace

uint64_t BootIdHash() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(in, boot_id);
  return boot_id.empty() ? 0 : std::hash<std::string>{}(boot_id) | 1;
}

// ---- MappableBlocks ----

MappableBlocks::~MappableBlocks() {
  for (auto& [start, block] : blocks_) {
    munmap(block.data, block.capacity);
    close(block.fd);
  }
}

MappableBlock MappableBlocks::Allocate(size_t capacity) {
  std::optional<MappableBlock> block = NewMemfdBlock(capacity);
  if (!block) return MappableBlock{new std::byte[capacity], capacity, -1, 0};
  std::lock_guard lock(mu_);
  blocks_.emplace(block->data, *block);
  return *block;
}

void MappableBlocks::Free(std::byte* data) {
  std::optional<MappableBlock> block;
  {
    std::lock_guard lock(mu_);
    auto it = blocks_.find(data);
    if (it != blocks_.end()) {
      block = it->second;
      blocks_.erase(it);
    }
  }
  if (!block) {
    delete[] data;
    return;
  }
  munmap(block->data, block->capacity);
  close(block->fd);
}

std::optional<PeerRegion> MappableBlocks::RegionOf(std::span<const std::byte> bytes) const {
  std::lock_guard lock(mu_);
  auto it = blocks_.upper_bound(bytes.data());
  if (it == blocks_.begin()) return std::nullopt;
  const MappableBlock& block = std::prev(it)->second;
  const size_t offset = static_cast<size_t>(bytes.data() - block.data);
  if (offset > block.capacity || bytes.size() > block.capacity - offset) return std::nullopt;
  return PeerRegion{static_cast<uint64_t>(block.fd), block.generation, offset, bytes.size()};
}

// ---- PeerMaps ----

PeerMaps::~PeerMaps() {
  for (auto& [key, m] : mappings_) munmap(const_cast<std::byte*>(m.data), m.length);
}

std::unique_ptr<PeerMaps> PeerMaps::Exchange(MPI_Comm comm) {
  auto maps = std::make_unique<PeerMaps>();
  const ProbeBlock& probe = Probe();
  struct Entry {
    uint64_t boot;
    uint64_t netns;
    int64_t pid;
    int64_t probe_fd;
    uint64_t probe_generation;
    uint64_t probe_value;
  };
  const Entry mine{BootIdHash(), NetworkNamespace(), static_cast<int64_t>(getpid()),
                   probe.fd,     probe.generation,   probe.value};
  int size = 1;
  int rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  std::vector<Entry> all(static_cast<size_t>(size));
  if (MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry), MPI_BYTE, comm) !=
      MPI_SUCCESS) {
    return maps;
  }
  int ok = 1;
  for (int r = 0; r < size; ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    maps->pids_.push_back(e.pid);
    if (e.boot == 0 || e.netns == 0 || e.probe_fd < 0 || e.boot != mine.boot ||
        e.netns != mine.netns) {
      ok = 0;
      continue;
    }
    if (r == rank) continue;
    // Map the peer's probe as any region, so the check goes through the same path.
    const PeerRegion region{static_cast<uint64_t>(e.probe_fd), e.probe_generation, 0,
                            sizeof(uint64_t)};
    StatusOr<const std::byte*> p = maps->Map(r, region, "");
    uint64_t value = 0;
    if (p.ok()) std::memcpy(&value, *p, sizeof(value));
    if (!p.ok() || value != e.probe_value) ok = 0;
  }
  int all_ok = 0;
  if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS) {
    maps->all_mapped_ = all_ok == 1;
  }
  return maps;
}

StatusOr<const std::byte*> PeerMaps::Map(int peer, const PeerRegion& region,
                                         const std::string& peer_name) {
  if (peer < 0 || peer >= static_cast<int>(pids_.size())) {
    return InvalidArgumentError(fmt::format("no rank {} to map memory of", peer));
  }
  Mapping& m = mappings_[{peer, region.segment}];
  if (m.data == nullptr || m.generation != region.generation) {
    if (m.data != nullptr) munmap(const_cast<std::byte*>(m.data), m.length);
    m = Mapping{};
    auto mapped = MapOf(pids_[static_cast<size_t>(peer)], region.segment, 0);
    if (!mapped.ok()) {
      mappings_.erase({peer, region.segment});
      return mapped.status().Annotate(fmt::format("memory of {}", peer_name));
    }
    m = Mapping{region.generation, mapped->first, mapped->second};
  }
  if (region.offset > m.length || region.bytes > m.length - region.offset) {
    return MalformedError(fmt::format("{} named bytes [{}, {}) of a block of {}", peer_name,
                                      region.offset, region.offset + region.bytes, m.length));
  }
  return m.data + region.offset;
}

}  // namespace frugal::mpi_internal
