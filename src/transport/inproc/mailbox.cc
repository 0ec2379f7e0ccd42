#include "transport/inproc/mailbox.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace frugal::inproc {
namespace {

bool Matches(int want_src, int want_tag, int src, int tag) {
  return (want_src == kAnySource || want_src == src) && want_tag == tag;
}

bool Visible(const Message& m, TimePoint now) { return m.visible_at <= now; }

}  // namespace

std::optional<size_t> Mailbox::FindEligible(int src, int tag, TimePoint now) const {
  // Sources whose oldest waiting message with this tag is still invisible: their later messages
  // must wait behind it.
  std::vector<int> blocked;
  for (size_t i = 0; i < unexpected.size(); ++i) {
    const Message& m = unexpected[i];
    if (!Matches(src, tag, m.src, m.tag)) continue;
    if (std::find(blocked.begin(), blocked.end(), m.src) != blocked.end()) continue;
    if (Visible(m, now)) return i;
    blocked.push_back(m.src);
  }
  return std::nullopt;
}

bool Mailbox::HasWaiting(int src, int tag) const {
  return std::any_of(unexpected.begin(), unexpected.end(),
                     [&](const Message& m) { return Matches(src, tag, m.src, m.tag); });
}

TimePoint Mailbox::NextVisible(TimePoint now) const {
  TimePoint next = TimePoint::max();
  for (const Message& m : unexpected) {
    if (!Visible(m, now)) next = std::min(next, m.visible_at);
  }
  return next;
}

std::shared_ptr<RecvOp> Mailbox::ClaimPosted(int src, int tag) {
  for (auto it = posted.begin(); it != posted.end(); ++it) {
    if (Matches((*it)->src, (*it)->tag, src, tag)) {
      std::shared_ptr<RecvOp> op = *it;
      posted.erase(it);
      op->phase = Phase::kCopying;
      return op;
    }
  }
  return nullptr;
}

Message Mailbox::Take(size_t index) {
  Message m = std::move(unexpected[index]);
  unexpected.erase(unexpected.begin() + static_cast<std::ptrdiff_t>(index));
  if (m.rendezvous) m.rendezvous->phase = Phase::kCopying;
  return m;
}

bool Mailbox::Withdraw(const SendOp& op) {
  for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
    if (it->rendezvous.get() == &op) {
      unexpected.erase(it);
      return true;
    }
  }
  return false;
}

bool Mailbox::Detach(const SendOp& op) {
  for (Message& m : unexpected) {
    if (m.rendezvous.get() == &op) {
      m.payload.assign(op.data.begin(), op.data.end());
      m.rendezvous.reset();
      return true;
    }
  }
  return false;
}

void Mailbox::Progress(std::unique_lock<std::mutex>& lock) {
  bool matched = true;
  while (matched) {
    matched = false;
    const TimePoint now = std::chrono::steady_clock::now();
    for (auto it = posted.begin(); it != posted.end(); ++it) {
      std::optional<size_t> index = FindEligible((*it)->src, (*it)->tag, now);
      if (!index) continue;
      std::shared_ptr<RecvOp> op = *it;
      posted.erase(it);
      op->phase = Phase::kCopying;
      Message m = Take(*index);
      lock.unlock();
      Fill(*op, m.src, m.tag, m.data(), m.flip_bit);
      lock.lock();
      FinishCopy(*this, *op, m.rendezvous.get());
      matched = true;
      break;
    }
  }
}

void Fill(RecvOp& op, int src, int tag, std::span<const std::byte> data,
          std::optional<uint64_t> flip_bit) {
  op.peer = src;
  op.bytes = data.size();
  if (data.size() > op.buffer.size()) {
    op.status = MalformedError(
        fmt::format("message of {} bytes from rank {} (tag {}) does not fit the receive buffer "
                    "of {} bytes",
                    data.size(), src, tag, op.buffer.size()));
    return;
  }
  if (!data.empty()) std::memcpy(op.buffer.data(), data.data(), data.size());
  if (flip_bit && !data.empty()) {
    const uint64_t bit = *flip_bit % (data.size() * 8);
    op.buffer[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
  }
  op.status = Status::Ok();
}

void FinishCopy(Mailbox& box, RecvOp& op, SendOp* send) {
  op.phase = Phase::kDone;
  if (send != nullptr) {
    send->phase = Phase::kDone;
    send->status = Status::Ok();
  }
  box.cv.notify_all();
}

}  // namespace frugal::inproc
