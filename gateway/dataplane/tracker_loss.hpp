// Loss classification, the steps every ACK takes (tracker.cpp calls them): SACK blocks and DSACK,
// and gaps the ACK closes. Inline, so a build without LTO inlines them too; the classification of
// old data and loss events are in tracker_loss.cpp.
#pragma once

#include "dataplane/tracker_internal.hpp"

namespace spand {

inline uint32_t Tracker::on_sack_blocks(HalfFlow& h, const ParsedPacket& p) {
  using namespace tracker_detail;
  const uint32_t ack = p.ack;
  // The receiver holds data above a hole.
  const bool sacks_above =
      p.opt.sack_count > 0 && seq_gt(p.opt.sack[p.opt.sack_count - 1].right, ack);
  if (p.opt.sack_count == 0) {
    h.flags &= ~kHfSackHoles;
  } else if (sacks_above) {
    h.flags |= kHfSackHoles;
  }
  // DSACK (RFC 2883): a first SACK block below the cumulative ACK, or inside the second block,
  // reports data received twice: the matching resend was spurious.
  bool dsack = false;
  if (p.opt.sack_count > 0) {
    const SackBlock& b0 = p.opt.sack[0];
    dsack = seq_le(b0.right, ack) || (p.opt.sack_count > 1 && seq_ge(b0.left, p.opt.sack[1].left) &&
                                      seq_le(b0.right, p.opt.sack[1].right));
    if (dsack) {
      LossState& l = loss(h);
      const uint32_t resent = uint32_t(l.rexmt_fast) + l.rexmt_timeout + l.rexmt_other;
      bump(l.dsacks);
      if (l.rexmt_spurious < resent) bump(l.rexmt_spurious);
    }
  }
  if (!sacks_above) return 0;
  // The bytes held above the ACK: the blocks' parts above it (at least one byte, so that a
  // non-zero answer always means "data above a hole").
  uint32_t sacked = 0;
  for (int i = dsack ? 1 : 0; i < p.opt.sack_count; ++i) {
    const SackBlock& b = p.opt.sack[i];
    if (seq_gt(b.right, ack)) sacked += b.right - (seq_gt(b.left, ack) ? b.left : ack);
  }
  return std::max<uint32_t>(sacked, 1);
}

inline void Tracker::forget_acked_gaps(HalfFlow& h, uint32_t ack) {
  if (!h.gaps_open) return;
  if (LossState* l = loss_if_any(h)) {
    bool open = false;
    for (int i = 0; i < LossState::kHoles; ++i) {
      if (seq_ge(ack, l->hole_hi[i])) l->hole_lo[i] = l->hole_hi[i];  // acked: gap is history
      open = open || l->hole_lo[i] != l->hole_hi[i];
    }
    h.gaps_open = open;
  }
}

}  // namespace spand
