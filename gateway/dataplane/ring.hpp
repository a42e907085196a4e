// Single-producer single-consumer ring of plain structs: a data lcore produces, the control side
// consumes. Capacity is fixed at construction (power of two); push never blocks or allocates and
// reports a full ring so the caller can count the loss.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "dataplane/prefetch.hpp"
#include "dataplane/table_memory.hpp"

namespace spand {

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring slots are copied by value");

 public:
  // Slots are zero pages committed as first used (table_memory.hpp), so a short replay costs the
  // slots it fills, not the capacity; `prefault`: all committed now (a live port: no page fault
  // on the packet path).
  explicit SpscRing(size_t capacity_pow2, bool prefault = false)
      : mask_(round_up(capacity_pow2) - 1),
        slots_(static_cast<T*>(
                   map_zeroed((mask_ + 1) * sizeof(T), prefault ? (mask_ + 1) * sizeof(T) : 0)),
               Unmap{(mask_ + 1) * sizeof(T)}) {}

  bool push(const T& v) {
    if (!push_unpublished(v)) return false;
    publish();
    return true;
  }

  // Producer side, for a burst of values: push_unpublished() writes a value that the consumer
  // does not see until publish(). One store to the shared index per burst rather than one per
  // value: the consumer's core polls that index, so each store takes its line back from there.
  bool push_unpublished(const T& v) {
    const size_t head = pending_head_;
    if (head - tail_cache_ > mask_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ > mask_) return false;
    }
    slots_[head & mask_] = v;
    pending_head_ = head + 1;
    // The slot written kWriteAhead values from now: its line was last read by the consumer's
    // core, and a store to it would wait for that line in the store buffer.
    prefetch_line_for_write(&slots_[(head + kWriteAhead) & mask_]);
    return true;
  }
  void publish() {
    if (pending_head_ != published_head_) {
      published_head_ = pending_head_;
      head_.store(pending_head_, std::memory_order_release);
    }
  }

  bool pop(T& out) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    out = slots_[tail & mask_];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  size_t size() const {
    return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
  }
  size_t capacity() const { return mask_ + 1; }
  // Producer side: slots free now (at least this many pushes will succeed).
  size_t room() const {
    return mask_ + 1 - (pending_head_ - tail_.load(std::memory_order_acquire));
  }

 private:
  static size_t round_up(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }
  static constexpr size_t kWriteAhead = 8;
  const size_t mask_;
  std::unique_ptr<T[], Unmap> slots_;
  alignas(64) std::atomic<size_t> head_{0};
  // The producer's own line: its last view of tail, and the values written (pending) and made
  // visible (published) so far.
  alignas(64) size_t tail_cache_ = 0;
  size_t pending_head_ = 0;
  size_t published_head_ = 0;
  alignas(64) std::atomic<size_t> tail_{0};
};

}  // namespace spand
