// capture/port_drops.hpp: the table behind spand_capture_port_dropped_total{port, cause}.
#include "capture/port_drops.hpp"

#include <gtest/gtest.h>

#include <string>

namespace spand {
namespace {

TEST(PortDrops, RowsKeepTheirCausesAndStartAtZero) {
  PortDrops t;
  const size_t eth = t.add_port("eth1", {CaptureDropCause::kKernel, CaptureDropCause::kInterface});
  const size_t nic =
      t.add_port("0000:03:00.0", {CaptureDropCause::kImissed, CaptureDropCause::kRxNombuf});
  EXPECT_EQ(eth, 0u);
  EXPECT_EQ(nic, 1u);
  t.set(nic, CaptureDropCause::kImissed, 7);
  t.set(eth, CaptureDropCause::kKernel, 3);
  // A cause the port does not report is not a series, even when written.
  t.set(eth, CaptureDropCause::kImissed, 99);
  const auto rows = t.snapshot();
  ASSERT_EQ(rows.size(), 4u);  // 2 ports x their 2 causes
  EXPECT_EQ(rows[0].port, "eth1");
  EXPECT_EQ(rows[0].cause, CaptureDropCause::kKernel);
  EXPECT_EQ(rows[0].total, 3u);
  EXPECT_EQ(rows[1].cause, CaptureDropCause::kInterface);
  EXPECT_EQ(rows[1].total, 0u);
  EXPECT_EQ(rows[2].port, "0000:03:00.0");
  EXPECT_EQ(rows[2].cause, CaptureDropCause::kImissed);
  EXPECT_EQ(rows[2].total, 7u);
  EXPECT_EQ(rows[3].cause, CaptureDropCause::kRxNombuf);
  EXPECT_STREQ(capture_drop_cause_name(rows[3].cause), "rx_nombuf");
}

TEST(PortDrops, AReopenedInterfaceKeepsItsRow) {
  PortDrops t;
  const size_t first = t.add_port("eth1", {CaptureDropCause::kKernel});
  t.set(first, CaptureDropCause::kKernel, 5);
  EXPECT_EQ(t.add_port("eth1", {CaptureDropCause::kKernel}), first);
  EXPECT_EQ(t.snapshot().size(), 1u);
  EXPECT_EQ(t.snapshot()[0].total, 5u);  // not reset by the second registration
}

TEST(PortDrops, FullTableGivesNoRowAndIgnoresWrites) {
  PortDrops t;
  for (size_t i = 0; i < PortDrops::kMaxPorts; ++i)
    EXPECT_EQ(t.add_port("p" + std::to_string(i), {CaptureDropCause::kImissed}), i);
  const size_t none = t.add_port("one too many", {CaptureDropCause::kImissed});
  EXPECT_EQ(none, PortDrops::kNone);
  t.set(none, CaptureDropCause::kImissed, 1);  // no effect, no crash
  EXPECT_EQ(t.snapshot().size(), PortDrops::kMaxPorts);
}

}  // namespace
}  // namespace spand
