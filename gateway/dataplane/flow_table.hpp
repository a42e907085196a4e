// Per-worker connection table: open addressing with linear probing over an array of 8-byte slots
// (a 32-bit probe tag and the index of the flow in a pool), backward-shift deletion (no
// tombstones). Never allocates after construction; one owner thread, no locks.
//
// Memory follows the load: the slot array is small (8 B per slot, 1.25 slots per connection of
// capacity) and the flows themselves (320 B each) live in a StatePool that commits only the most
// ever in use at once, so a replay of 50,000 connections costs 50,000 flows whatever the capacity.
// The slots keep the geometry of a table with one flow per slot (the same home slots, probe runs,
// sweep order and victims), so the table's outputs do not depend on where flows are stored.
//
// Full-table policy: the table refuses to grow past `capacity` live flows. A new connection then
// evicts the least recently seen flow among the first kEvictWindow occupied slots of its probe
// sequence, preferring a SYN-only (half-open) flow, then an unverified one (Flow::verified: a
// lone ACK); a newcomer that is not a SYN displaces only an unverified flow (else it is refused).
// The caller finalizes the evicted flow (close reason "evicted") before it is overwritten, and
// counts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "dataplane/flow.hpp"
#include "dataplane/prefetch.hpp"
#include "dataplane/state_pool.hpp"
#include "dataplane/table_memory.hpp"

namespace spand {

class FlowTable {
 public:
  static constexpr uint32_t kEvictWindow = 8;

  // `prefault_flows`: flows whose memory is committed now, and kept committed that far ahead of
  // the most ever in use by commit_ahead() (a live port: no page fault on the packet path); the
  // slot array is then committed whole. 0: everything is committed as first used (files).
  explicit FlowTable(uint32_t capacity, uint32_t prefault_flows = 0);

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return size_; }
  uint32_t slots() const { return slots_; }
  // Reserved address space: the slot array and a flow for every connection of capacity (only
  // what is used is committed).
  size_t memory_bytes() const {
    return size_t(slots_) * sizeof(Slot) + size_t(capacity_) * (sizeof(Flow) + sizeof(uint32_t));
  }
  uint32_t flows_peak() const { return pool_.peak_in_use(); }  // flows ever committed
  // Control side (another thread): see StatePool::commit_ahead(); `peak_seen` is the owner's
  // published flows_peak().
  uint32_t commit_ahead(uint32_t peak_seen) { return pool_.commit_ahead(peak_seen); }
  uint32_t flows_committed() const { return pool_.committed(); }

  // The slot where the probe for `hash` starts: the worker computes it once per packet and
  // hands it to prefetch(), prefetch_flow() and find().
  uint32_t home_of(uint32_t hash) const { return home(tag_of(hash)); }
  Flow* find(const FlowKey& key, uint32_t hash) { return find(key, hash, home_of(hash)); }
  Flow* find(const FlowKey& key, uint32_t hash, uint32_t home_slot) {
    const uint32_t tag = tag_of(hash);
    for (uint32_t i = home_slot;; i = next(i)) {
      const Slot s = table_[i];
      if (s.tag == kEmpty) return nullptr;
      if (s.tag == tag) {
        Flow& f = pool_.at(s.flow);
        if (f.key == key) return &f;
      }
    }
  }

  // Starts loading the home slot of `hash` into the cache.
  void prefetch(uint32_t hash) const { prefetch_slot(home_of(hash)); }
  void prefetch_slot(uint32_t home_slot) const { prefetch_line(&table_[home_slot]); }
  // Once the slot is in (prefetch() some packets earlier): starts loading the lines of the flow
  // whose tag matches, if any.
  void prefetch_flow(uint32_t hash) const { prefetch_flow(hash, home_of(hash)); }
  void prefetch_flow(uint32_t hash, uint32_t home_slot) const {
    const uint32_t tag = tag_of(hash);
    uint32_t i = home_slot;
    for (int n = 0; n < 4; ++n, i = next(i)) {
      const Slot s = table_[i];
      if (s.tag == kEmpty) return;
      if (s.tag == tag) {
        const char* line = reinterpret_cast<const char*>(&pool_.at(s.flow));
        for (size_t off = 0; off < sizeof(Flow); off += 64) prefetch_line(line + off);
        return;
      }
    }
  }

  // Inserts a new, zeroed flow for `key` (not present). When full, `on_evict(Flow&)` is called on
  // the victim before it is removed. Returns the new flow; null only when full and the newcomer
  // is not a SYN (`syn_newcomer` false: e.g. a lone ACK of a flood) and no unverified flow is
  // among the candidates: such a newcomer never displaces a verified or half-open connection.
  template <typename OnEvict>
  Flow* insert(const FlowKey& key, uint32_t hash, OnEvict&& on_evict, bool syn_newcomer = true) {
    if (size_ >= capacity_) {
      uint32_t victim = pick_victim(hash, syn_newcomer);
      if (victim == UINT32_MAX) return nullptr;
      on_evict(pool_.at(table_[victim].flow));
      erase_slot(victim);
    }
    const uint32_t tag = tag_of(hash);
    uint32_t i = home(tag);
    while (table_[i].tag != kEmpty) i = next(i);
    const uint32_t index = pool_.take();  // never 0: at most capacity_ flows are held
    table_[i] = Slot{tag, index};
    Flow* f = &pool_.at(index);
    f->key = key;
    ++size_;
    pool_.prefetch_next_for_write();  // for the next insert
    return f;
  }

  // Removes a flow returned by find()/insert() for `hash`. Other flows stay where they are.
  void erase(Flow* f, uint32_t hash) { erase_slot(slot_of(*f, hash)); }

  // Visits up to `budget` slots from a rotating cursor; `fn(Flow&)` returns true to erase it.
  // Spreads timeout scanning over packets instead of a stop-the-world sweep.
  template <typename Fn>
  void sweep(uint32_t budget, Fn&& fn) {
    while (budget-- > 0) {
      const uint32_t i = cursor_;
      // The slot visited kSweepAhead packets from now arrives meanwhile, and the first line
      // (key, phase, last_ns) of the flow in the slot half as far ahead (its slot is in by now).
      uint32_t ahead = i + kSweepAhead;
      if (ahead >= slots_) ahead %= slots_;
      prefetch_line(&table_[ahead]);
      uint32_t half = i + kSweepAhead / 2;
      if (half >= slots_) half %= slots_;
      if (table_[half].tag != kEmpty) pool_.prefetch(table_[half].flow);
      if (table_[i].tag != kEmpty && fn(pool_.at(table_[i].flow))) {
        erase_slot(i);  // a later flow may shift into slot i: look at i again
        continue;
      }
      cursor_ = next(cursor_);
    }
  }

  // Removes up to `budget` flows, calling `fn(Flow&)` on each first; resumable (the cursor
  // stays), so a caller can empty a large table in slices and drain its outputs in between.
  // Returns the number of flows left.
  template <typename Fn>
  uint32_t erase_some(uint32_t budget, Fn&& fn) {
    while (budget > 0 && size_ > 0) {
      const uint32_t i = cursor_;
      if (table_[i].tag != kEmpty) {
        fn(pool_.at(table_[i].flow));
        erase_slot(i);  // a later flow may shift into slot i: look at i again
        --budget;
      } else {
        cursor_ = next(cursor_);
      }
    }
    return size_;
  }

 private:
  struct Slot {
    uint32_t tag;   // kEmpty, or the flow's hash with the low bit set
    uint32_t flow;  // index in pool_
  };
  static constexpr uint32_t kEmpty = 0;
  static constexpr uint32_t kSweepAhead = 16;
  static uint32_t tag_of(uint32_t hash) { return hash | 1u; }  // never kEmpty
  // Home slot of a tag (Lemire's multiply-shift range reduction: any slot count works). Tags
  // keep the hash, so deletion never rehashes keys.
  uint32_t home(uint32_t tag) const { return uint32_t((uint64_t(tag) * slots_) >> 32); }
  uint32_t next(uint32_t i) const { return i + 1 == slots_ ? 0 : i + 1; }
  uint32_t pick_victim(uint32_t hash, bool syn_newcomer) const;
  uint32_t slot_of(const Flow& f, uint32_t hash) const;
  void erase_slot(uint32_t i);

  uint32_t capacity_;
  uint32_t slots_;
  uint32_t size_ = 0;
  uint32_t cursor_ = 0;
  std::unique_ptr<Slot[], Unmap> table_;
  StatePool<Flow> pool_;
};

}  // namespace spand
